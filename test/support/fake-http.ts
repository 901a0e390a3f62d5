import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

/** A request as a fake server received it. */
export interface ReceivedHttpRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; the raw text when it is not JSON; `undefined` when empty. */
  body: any;
}

/** A first-in first-out queue whose `take` waits for the next value. */
export class AsyncQueue<T> {
  private readonly values: T[] = [];
  private readonly waiters: Array<(value: T) => void> = [];

  push(value: T): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(value);
    else this.values.push(value);
  }

  take(): Promise<T> {
    if (this.values.length) return Promise.resolve(this.values.shift() as T);
    return new Promise((resolve) => this.waiters.push(resolve));
  }
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

/** Answers with a JSON body. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Splits `text` into `count` pieces of near-equal length (fewer when it is shorter). */
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
