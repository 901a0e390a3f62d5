import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';

/** A request as a fake server received it: any path, model call or not. */
export interface ReceivedHttpRequest {
  /** The HTTP method, e.g. `POST`. */
  method: string;
  /** Path without the query string, e.g. `/v1/chat/completions`. */
  path: string;
  /** The request headers, as Node parsed them (lower-case names). */
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; the raw text when it is not JSON; `undefined` when empty. */
  body: any;
}

/** Reads a whole request: method, path, headers and the body (JSON when it parses). */
export async function readRequest(req: IncomingMessage): Promise<ReceivedHttpRequest> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  const text = Buffer.concat(parts).toString('utf8');
  let body: any = undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  return { method: req.method ?? 'GET', path, headers: req.headers, body };
}

/**
 * Answers with a JSON body.
 * @internal
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/**
 * Splits `text` into `count` pieces of near-equal length (fewer when it is shorter), at
 * code points: the deltas of a streamed answer.
 * @internal
 */
export function split(text: string, count: number): string[] {
  const chars = Array.from(text);
  if (!chars.length) return [];
  const n = Math.max(1, Math.min(Math.floor(count), chars.length));
  const pieces: string[] = [];
  for (let i = 0; i < n; i++) {
    pieces.push(
      chars
        .slice(Math.floor((i * chars.length) / n), Math.floor(((i + 1) * chars.length) / n))
        .join(''),
    );
  }
  return pieces;
}

/**
 * Starts a bare HTTP server (no request listener yet) on a free port of 127.0.0.1: the
 * `server` to give a {@link ScriptedHttpServer} subclass.
 */
export async function listenLocal(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}
