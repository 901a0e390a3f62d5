import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The few Express request/response members the API uses (the server runs on
 * `@nestjs/platform-express`; Express's own typings are not a dependency).
 */
export interface HttpRequest extends IncomingMessage {
  ip?: string;
  /** The path of the URL, without the query. */
  path: string;
  /** The matching media type, `false` when the body has another type, `null` without body. */
  is(types: string[]): string | false | null;
}

/** Express's response helpers over Node's response. */
export interface HttpResponse extends ServerResponse {
  status(code: number): this;
  json(body: unknown): this;
}

/** Express's `next`. */
export type NextFn = (error?: unknown) => void;

/** An Express middleware. */
export type Middleware = (req: HttpRequest, res: HttpResponse, next: NextFn) => void;
