import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

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

/** Starts a bare HTTP server on a free port of 127.0.0.1. */
export async function listenLocal(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}

/**
 * The plumbing both fake model servers share: scripts taken in order, held answers released
 * by the test, the queue of model requests and of early client disconnects, and a close that
 * leaves no socket open. Subclasses speak their wire format in `answer`.
 */
export abstract class ScriptedHttpServer<S> {
  /** Parsed JSON bodies of the model requests received, in order. */
  readonly requests: any[] = [];
  /** Every request received (any path), in order. */
  readonly received: ReceivedHttpRequest[] = [];
  /** Called on every request, before it is answered. */
  onRequest?: (request: ReceivedHttpRequest) => void;

  protected readonly scripts: S[] = [];
  protected closing = false;
  protected sequence = 0;
  private readonly held: Array<() => void> = [];
  private readonly sockets = new Set<Socket>();
  private readonly requestQueue = new AsyncQueue<any>();
  private readonly disconnects = new AsyncQueue<void>();

  protected constructor(
    protected readonly server: Server,
    /** The JSON body of a 500 answer when handling a request throws. */
    failure: (message: string) => unknown,
  ) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((error: unknown) => {
        if (res.destroyed) return;
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(failure(String(error))));
      });
    });
  }

  /** `http://127.0.0.1:<port>`. */
  protected get origin(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Number of queued scripts not yet used. */
  get pending(): number {
    return this.scripts.length;
  }

  /** Number of answers currently held open. */
  get heldCount(): number {
    return this.held.length;
  }

  /** Queues scripts; each model request takes the oldest one. */
  enqueue(...scripts: S[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  /** Drops the queued scripts not yet used (retries a call did not make); returns how many. */
  discardScripts(): number {
    return this.scripts.splice(0).length;
  }

  /**
   * Lets held answers finish: the `count` oldest ones, or all when omitted. Releases only
   * answers held now (a request is held by the time `nextRequest()` resolves with it).
   */
  release(count = Infinity): void {
    for (const release of this.held.splice(0, count)) release();
  }

  /** The body of the oldest model request not yet handed out, waiting for one if none. */
  nextRequest(): Promise<any> {
    return this.requestQueue.take();
  }

  /**
   * Resolves on the oldest client disconnect not yet handed out: a client closing its
   * connection before its answer finished (a held answer, typically, after an abort).
   */
  waitForDisconnect(): Promise<void> {
    return this.disconnects.take();
  }

  /** Releases held answers, destroys open sockets and stops listening. */
  async close(): Promise<void> {
    this.closing = true;
    this.release();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
      for (const socket of this.sockets) socket.destroy();
    });
  }

  /** Whether a request is a model call (recorded, queued, answered from a script). */
  protected abstract isModelCall(request: ReceivedHttpRequest): boolean;

  /** Answers a model call from the next script. */
  protected abstract answer(body: any, res: ServerResponse): Promise<void>;

  /** Answers any other request (model listings, 404s). */
  protected abstract answerOther(request: ReceivedHttpRequest, res: ServerResponse): void;

  /** Takes the next script, or `fallback` when none is queued. */
  protected nextScript(fallback: S): S {
    return this.scripts.shift() ?? fallback;
  }

  /** Holds the answer until `release()` or until the client goes away. */
  protected hold(res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        res.off('close', onClose);
        resolve();
      };
      const onClose = (): void => {
        const index = this.held.indexOf(release);
        if (index >= 0) this.held.splice(index, 1);
        resolve();
      };
      this.held.push(release);
      res.on('close', onClose);
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const request = await readRequest(req);
    this.received.push(request);
    const modelCall = this.isModelCall(request);
    if (modelCall) {
      this.requests.push(request.body);
      this.requestQueue.push(request.body);
      res.on('close', () => {
        if (!res.writableFinished) this.disconnects.push();
      });
    }
    this.onRequest?.(request);
    if (modelCall) return this.answer(request.body ?? {}, res);
    this.answerOther(request, res);
  }
}

/** A request as a {@link FakeFetch} received it. */
export interface FetchedRequest {
  url: string;
  /** Parsed JSON body, when it is JSON. */
  body: any;
  signal?: AbortSignal;
}

/** How a {@link FakeFetch} answers one request: a Response, or a promise of one. */
export type FetchAnswer = (request: FetchedRequest) => Response | Promise<Response>;

/**
 * A `fetch` double for providers (their `fetch` option): each request takes the oldest queued
 * answer (`fallback` when none is queued) and is recorded. Faster and more exact than a socket
 * for unit tests; the socket-level faults are in `test/e2e/model-faults.e2e-spec.ts`.
 */
export class FakeFetch {
  readonly requests: FetchedRequest[] = [];
  private readonly answers: FetchAnswer[] = [];
  private readonly arrivals = new AsyncQueue<FetchedRequest>();

  constructor(private readonly fallback: FetchAnswer) {}

  /** Queues answers, each used once. */
  enqueue(...answers: FetchAnswer[]): this {
    this.answers.push(...answers);
    return this;
  }

  /** The oldest request not yet handed out, waiting for one if none. */
  nextRequest(): Promise<FetchedRequest> {
    return this.arrivals.take();
  }

  /** The `fetch` to give a provider. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const text = typeof init?.body === 'string' ? init.body : undefined;
    let body: any = text;
    try {
      body = text === undefined ? undefined : JSON.parse(text);
    } catch {
      // Not JSON: kept as text.
    }
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const request = { url, body, signal: init?.signal ?? undefined };
    this.requests.push(request);
    this.arrivals.push(request);
    if (request.signal?.aborted) throw abortError();
    return (this.answers.shift() ?? this.fallback)(request);
  };
}

/** The error `fetch` and its bodies fail with on abort. */
export function abortError(): Error {
  return new DOMException('This operation was aborted', 'AbortError');
}

/**
 * An answer with `body` (text, sent as bytes so that no content type is implied) and a content
 * type (`null`: no header at all).
 */
export function answerWith(body: string, contentType: string | null, status = 200): FetchAnswer {
  return () =>
    new Response(new TextEncoder().encode(body), {
      status,
      headers: contentType ? { 'content-type': contentType } : {},
    });
}

/** An SSE answer of `data:` payloads (no `[DONE]` added). */
export function sseAnswer(payloads: string[]): FetchAnswer {
  return answerWith(payloads.map((data) => `data: ${data}\n\n`).join(''), 'text/event-stream');
}

/** Never answers: rejects when the request is aborted (an endpoint silent before headers). */
export const hangBeforeHeaders: FetchAnswer = (request) =>
  new Promise((_resolve, reject) => {
    request.signal?.addEventListener('abort', () => reject(abortError()), { once: true });
  });

/**
 * An event stream that sends `first` (SSE text, if any), then `every(n)` each `everyMs` when
 * given (keep-alive comments, say), and never ends: it fails when the request is aborted.
 */
export function openStream(
  first = '',
  repeat?: { everyMs: number; text: string },
  contentType = 'text/event-stream',
): FetchAnswer {
  return (request) => {
    const encoder = new TextEncoder();
    let timer: ReturnType<typeof setInterval> | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        if (first) controller.enqueue(encoder.encode(first));
        if (repeat) {
          timer = setInterval(
            () => controller.enqueue(encoder.encode(repeat.text)),
            repeat.everyMs,
          );
        }
        request.signal?.addEventListener(
          'abort',
          () => {
            clearInterval(timer);
            controller.error(abortError());
          },
          { once: true },
        );
      },
      cancel() {
        clearInterval(timer);
      },
    });
    return new Response(body, { status: 200, headers: { 'content-type': contentType } });
  };
}
