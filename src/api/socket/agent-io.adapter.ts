import type { INestApplicationContext } from '@nestjs/common';
import { IoAdapter } from '@nestjs/platform-socket.io';
import type { ServerOptions } from 'socket.io';
import { API_OPTIONS, type ResolvedApiOptions } from '../api.module-definition';

/** Longest wait for clients to receive what was already sent, when the server closes. */
export const SOCKET_FLUSH_TIMEOUT_MS = 2000;

/**
 * The engine's buffer limit for a payload limit: twice it, so that a payload somewhat over the
 * limit still reaches the gateway and is acked with a 413 (the connection stays open); only
 * one far beyond it makes the engine close the connection, before decoding it.
 */
export const socketBufferBytes = (payloadLimit: number) => payloadLimit * 2;

/** The part of an engine.io socket this adapter reads. */
interface EngineSocket {
  writeBuffer?: unknown[];
  once(event: 'drain' | 'close', listener: () => void): unknown;
}

/** Resolves once the socket has handed its buffered packets to its transport. */
function flushed(socket: EngineSocket): Promise<void> {
  if (!socket.writeBuffer?.length) return Promise.resolve();
  return new Promise((resolve) => {
    socket.once('drain', () => resolve(flushed(socket)));
    socket.once('close', resolve);
  });
}

/**
 * Socket.IO adapter (`@nestjs/platform-socket.io`) that lets clients receive what was already
 * emitted before the server closes them. On shutdown the agent's drain ends the running turns,
 * whose last events (`turn` end, the stream-end marker) may still sit in a client's buffer;
 * Socket.IO's own close would discard them. Bounded by `SOCKET_FLUSH_TIMEOUT_MS`, so a client
 * that stopped reading cannot hold the shutdown. Its `maxHttpBufferSize` follows the payload
 * limit (the REST body limit, `AgentApiModule`'s `bodyLimit` unless given), see
 * {@link socketBufferBytes}. A host sets it with `app.useWebSocketAdapter(new
 * AgentIoAdapter(app))`; without it Nest's own `IoAdapter` serves the gateway.
 */
export class AgentIoAdapter extends IoAdapter {
  private readonly payloadLimit: number;

  constructor(app: INestApplicationContext, payloadLimit?: number) {
    super(app);
    this.payloadLimit =
      payloadLimit ?? app.get<ResolvedApiOptions>(API_OPTIONS, { strict: false }).bodyLimit;
  }

  override createIOServer(port: number, options?: ServerOptions): unknown {
    return super.createIOServer(port, {
      ...options,
      maxHttpBufferSize: socketBufferBytes(this.payloadLimit),
    });
  }

  override async close(server: unknown): Promise<void> {
    const clients = (server as { engine?: { clients?: Record<string, EngineSocket> } }).engine
      ?.clients;
    if (clients) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SOCKET_FLUSH_TIMEOUT_MS);
      });
      await Promise.race([Promise.all(Object.values(clients).map(flushed)), timeout]);
      clearTimeout(timer);
    }
    return super.close(server as Parameters<IoAdapter['close']>[0]);
  }
}
