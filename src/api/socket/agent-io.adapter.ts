import type { INestApplicationContext } from '@nestjs/common';
import { IoAdapter } from '@nestjs/platform-socket.io';
import type { ServerOptions } from 'socket.io';
import { AgentDistribution } from '../../agent';
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
 * {@link socketBufferBytes}. In distributed mode it installs the Socket.IO Redis adapter, so that
 * a dashboard on one instance sees the turns of every instance. A host sets it with `app.useWebSocketAdapter(new
 * AgentIoAdapter(app))`; without it Nest's own `IoAdapter` serves the gateway.
 */
export class AgentIoAdapter extends IoAdapter {
  private readonly payloadLimit: number;
  private closeRedis?: () => Promise<void>;

  constructor(
    private readonly app: INestApplicationContext,
    payloadLimit?: number,
  ) {
    super(app);
    this.payloadLimit =
      payloadLimit ?? app.get<ResolvedApiOptions>(API_OPTIONS, { strict: false }).bodyLimit;
  }

  override createIOServer(port: number, options?: ServerOptions): unknown {
    const server = super.createIOServer(port, {
      ...options,
      maxHttpBufferSize: socketBufferBytes(this.payloadLimit),
    }) as { adapter(adapter: unknown): unknown };
    // Distributed mode: a room's events reach the clients of every instance.
    const redis = this.distribution()?.socketAdapter();
    if (redis) {
      server.adapter(redis.adapter);
      this.closeRedis = redis.close;
    }
    return server;
  }

  /** The agent's distribution, when `AgentModule` is in the application. */
  private distribution(): AgentDistribution | undefined {
    try {
      return this.app.get(AgentDistribution, { strict: false });
    } catch {
      return undefined;
    }
  }

  override async close(server: unknown): Promise<void> {
    await this.flush(server);
    await super.close(server as Parameters<IoAdapter['close']>[0]);
    await this.closeRedis?.();
  }

  /** Waits, bounded, for the clients to receive what was already sent. */
  private async flush(server: unknown): Promise<void> {
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
  }
}
