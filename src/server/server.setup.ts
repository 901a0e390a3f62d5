import type { INestApplication } from '@nestjs/common';
import { SwaggerModule } from '@nestjs/swagger';
import type { Server } from 'node:http';
import {
  AgentIoAdapter,
  API_OPTIONS,
  bodyOf,
  openApiConfig,
  RATE_BUCKETS,
  RateLimiter,
  type HttpRequest,
  type HttpResponse,
  type Middleware,
  type NextFn,
  type RateLimit,
  type ResolvedApiOptions,
} from '../api';
import { applyHttpLimits } from './http-limits';
import { HttpShutdown } from './http-shutdown';
import { pacedRequests } from './request-pacer';
import { SERVER_OPTIONS, type ResolvedServerOptions } from './server-options';

/** The part of an Express application that holds its settings. */
interface ExpressSettings {
  set(name: string, value: unknown): unknown;
}

/** Where the OpenAPI UI and documents are served. */
export const DOCS_PATH = 'docs';

const send = (res: HttpResponse, status: number, message: string) =>
  res.status(status).json(bodyOf(status, message));

/** 503 with `Connection: close` for requests that arrive while the server shuts down. */
function refuseWhileClosing(shutdown: HttpShutdown): Middleware {
  return (_req: HttpRequest, res: HttpResponse, next: NextFn) => {
    if (!shutdown.isClosing) return next();
    res.setHeader('Connection', 'close');
    send(res, 503, 'The server is shutting down');
  };
}

/** The public rate limit for routes served outside Nest's router (the OpenAPI pages). */
function rateLimited(limiter: RateLimiter, limit: RateLimit): Middleware {
  return (req: HttpRequest, res: HttpResponse, next: NextFn) => {
    limiter
      .hit(RATE_BUCKETS.docs, req.ip ?? req.socket.remoteAddress, limit)
      .then((verdict) => {
        if (!verdict.blocked) return next();
        res.setHeader('Retry-After', verdict.retryAfterSeconds);
        send(res, 429, 'Too many requests, slow down');
      })
      .catch(next);
  };
}

/**
 * What only the server does to its application (a host embedding `AgentApiModule` does none of
 * it): call it on an application built from `AppModule` with `bodyParser: false`, before
 * `listen` / `init`. Sets the HTTP server's timeouts and connection cap (`http` options) and Express's `trust proxy` (`trustProxy`), then
 * installs, in order: 503 while shutting down, request pacing (`/health` bypasses it), the
 * Socket.IO adapter (its buffer sized from the body limit; it lets clients receive the last
 * events on shutdown), and the OpenAPI document at `/docs` (UI), `/docs-json` and
 * `/docs-yaml`, generated from the controllers and DTOs and rate limited like the other
 * public routes. The agent's routes parse their own JSON bodies (`AgentApiModule`).
 */
export function setupServer(app: INestApplication): void {
  const api = app.get<ResolvedApiOptions>(API_OPTIONS);
  const server = app.get<ResolvedServerOptions>(SERVER_OPTIONS);
  applyHttpLimits(app.getHttpServer() as Server, server.http);
  // Express reads it for `req.ip`; the Socket.IO handshakes read Express's compiled setting.
  if (server.trustProxy !== false) {
    (app.getHttpAdapter().getInstance() as ExpressSettings).set('trust proxy', server.trustProxy);
  }
  app.use(refuseWhileClosing(app.get(HttpShutdown)));
  app.use(pacedRequests(['/health']));
  app.useWebSocketAdapter(new AgentIoAdapter(app, api.bodyLimit));
  app.use(
    [`/${DOCS_PATH}`, `/${DOCS_PATH}-json`, `/${DOCS_PATH}-yaml`],
    rateLimited(app.get(RateLimiter), api.rateLimits.public),
  );
  SwaggerModule.setup(DOCS_PATH, app, () => SwaggerModule.createDocument(app, openApiConfig()), {
    jsonDocumentUrl: `${DOCS_PATH}-json`,
    yamlDocumentUrl: `${DOCS_PATH}-yaml`,
  });
}
