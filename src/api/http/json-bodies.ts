import { createRequire } from 'node:module';
import { bodyOf, toErrorBody } from './api-error';
import type { HttpRequest, HttpResponse, Middleware, NextFn } from './http-types';

/** Media types parsed as JSON; every other body is refused with 415. */
export const JSON_TYPES = ['application/json', 'application/*+json'];

type JsonParser = (options: { limit: number; type: string[] }) => Middleware;

/**
 * Express's JSON parser, as `@nestjs/platform-express` has it (the express it depends on, found
 * from its own folder whatever the host's package layout).
 */
function expressJson(): JsonParser {
  const fromPlatform = createRequire(require.resolve('@nestjs/platform-express'));
  return (fromPlatform('express') as { json: JsonParser }).json;
}

/**
 * The module's own body handling, bound to its routes only (the host's other routes keep
 * whatever the host set): 415 for a body that is not JSON (an empty body is fine), then the
 * JSON parser with the module's size limit (413 beyond it, 400 for malformed JSON), both
 * answered in the API's error shape. A body the host's own parser already read is left alone.
 */
export function jsonBodies(limit: number): Middleware[] {
  const parse = expressJson()({ limit, type: JSON_TYPES });
  const jsonOnly: Middleware = (req: HttpRequest, res: HttpResponse, next: NextFn) => {
    const empty = req.headers['content-length'] === '0';
    if (empty || req.is(JSON_TYPES) !== false) return next();
    res
      .status(415)
      .json(bodyOf(415, 'Request bodies must be JSON (Content-Type: application/json)'));
  };
  const parsed: Middleware = (req, res, next) =>
    parse(req, res, (error?: unknown) => {
      if (!error) return next();
      const body = toErrorBody(error);
      res.status(body.statusCode).json(body);
    });
  return [jsonOnly, parsed];
}
