import { AsyncQueue } from '../../src/testing/async-queue';

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
