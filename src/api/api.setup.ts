import type { INestApplication } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import type { Server } from 'node:http';
import { API_OPTIONS, type RateLimit, type ResolvedApiOptions } from './api.module-definition';
import { bodyOf } from './http/api-error';
import { openApiConfig } from './http/api-docs';
import { applyHttpLimits } from './http/http-limits';
import { HttpShutdown } from './http/http-shutdown';
import type { HttpRequest, HttpResponse, Middleware, NextFn } from './http/http-types';
import { RATE_BUCKETS, RateLimiter } from './http/rate-limiter';
import { pacedRequests } from './http/request-pacer';
import { AgentIoAdapter } from './socket/agent-io.adapter';

/** Media types parsed as JSON; every other body is refused with 415. */
const JSON_TYPES = ['application/json', 'application/*+json'];

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

/** 415 for a body that is not JSON (an empty body is fine). */
function jsonBodiesOnly(): Middleware {
  return (req: HttpRequest, res: HttpResponse, next: NextFn) => {
    const empty = req.headers['content-length'] === '0';
    if (empty || req.is(JSON_TYPES) !== false) return next();
    send(res, 415, 'Request bodies must be JSON (Content-Type: application/json)');
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
 * Applies what a module cannot: call it on an application built from a module that imports
 * `ApiModule`, before `listen` / `init`, and create the application with `bodyParser: false`.
 * Sets the HTTP server's timeouts and connection cap (`http` options), then installs, in
 * order: 503 while shutting down, 415 for non-JSON bodies, the JSON body parser with the size
 * limit (413 beyond it, 400 for malformed JSON, both in the error shape), the Socket.IO
 * adapter (its buffer sized from the same limit; it lets clients receive the last events on
 * shutdown), and the OpenAPI document at `/docs` (UI), `/docs-json` and `/docs-yaml`,
 * generated from the controllers and DTOs and rate limited like the other public routes.
 */
export function setupApi(app: INestApplication): void {
  const options = app.get<ResolvedApiOptions>(API_OPTIONS);
  applyHttpLimits(app.getHttpServer() as Server, options.http);
  app.use(refuseWhileClosing(app.get(HttpShutdown)));
  app.use(pacedRequests(['/health']));
  app.use(jsonBodiesOnly());
  (app as NestExpressApplication).useBodyParser('json', {
    limit: options.bodyLimit,
    type: JSON_TYPES,
  });
  app.useWebSocketAdapter(new AgentIoAdapter(app, options.bodyLimit));
  app.use(
    [`/${DOCS_PATH}`, `/${DOCS_PATH}-json`, `/${DOCS_PATH}-yaml`],
    rateLimited(app.get(RateLimiter), options.rateLimits.public),
  );
  SwaggerModule.setup(DOCS_PATH, app, () => SwaggerModule.createDocument(app, openApiConfig()), {
    jsonDocumentUrl: `${DOCS_PATH}-json`,
    yamlDocumentUrl: `${DOCS_PATH}-yaml`,
  });
}
