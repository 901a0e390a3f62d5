import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { SERVER_OPTIONS, type ResolvedServerOptions } from './server-options';

/** How often idle keep-alive connections are closed while shutting down. */
const IDLE_SWEEP_MS = 100;

/**
 * Graceful HTTP shutdown. When the application starts closing (`onModuleDestroy`, before the
 * agent drains in `beforeApplicationShutdown`), the listener stops accepting connections and
 * requests arriving on open ones get 503 (see `setupServer`); requests already running, such as
 * a `?wait=true` answer that the drain settles, finish. Idle keep-alive connections are closed
 * as they become idle; whatever is still open after `shutdownGraceMs` (a stuck HTTP client, a
 * WebSocket whose peer stopped reading) is destroyed, so no client can hold the process.
 */
@Injectable()
export class HttpShutdown implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('HttpShutdown');
  private readonly connections = new Set<Socket>();
  private closing = false;

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(SERVER_OPTIONS) private readonly options: ResolvedServerOptions,
  ) {}

  /** Whether the application is shutting down (new requests are refused with 503). */
  get isClosing(): boolean {
    return this.closing;
  }

  onApplicationBootstrap(): void {
    this.server()?.on('connection', (socket: Socket) => {
      this.connections.add(socket);
      socket.once('close', () => this.connections.delete(socket));
    });
  }

  onModuleDestroy(): void {
    if (this.closing) return;
    this.closing = true;
    const server = this.server();
    if (!server?.listening) return;
    const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    const cut = setTimeout(() => {
      if (!this.connections.size) return;
      this.logger.warn(
        `Shutdown grace elapsed: destroying ${this.connections.size} remaining connection(s)`,
      );
      for (const socket of this.connections) socket.destroy();
    }, this.options.shutdownGraceMs);
    sweep.unref();
    cut.unref();
    server.close(() => {
      clearInterval(sweep);
      clearTimeout(cut);
    });
  }

  private server(): Server | undefined {
    return this.adapterHost.httpAdapter?.getHttpServer?.() as Server | undefined;
  }
}
