import { getEventListeners } from 'node:events';
import { APIUserAbortError } from 'openai';
import type { ChatRequest, ChatStreamChunk } from '../../../../src/contracts';
import { ProviderError } from '../../../../src/llm/provider-error';
import {
  OpenAiCompatibleProvider,
  type OpenAiCompatibleProviderOptions,
} from '../../../../src/llm/openai-compatible/openai-compatible.provider';
import {
  answerWith,
  FakeFetch,
  hangBeforeHeaders,
  openStream,
  sseAnswer,
} from '../../../support/fake-fetch';

/** A chat-completions chunk carrying `content` (and a finish reason when given). */
const chunk = (content: string, finish: string | null = null) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content }, finish_reason: finish }],
  });

const OK = sseAnswer([chunk('ok', 'stop'), '[DONE]']);
const IDLE = 100;

interface Outcome {
  text: string;
  error?: unknown;
  elapsedMs: number;
}

async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<Outcome> {
  const started = performance.now();
  const out: Outcome = { text: '', elapsedMs: 0 };
  try {
    for await (const piece of stream) out.text += piece.contentDelta ?? '';
  } catch (error) {
    out.error = error;
  }
  out.elapsedMs = performance.now() - started;
  return out;
}

/**
 * Deadlines of streamed calls (idle timeout before the headers and between chunks, one budget
 * for the attempts before the first token) through an injected fetch; the same faults over real
 * sockets are in test/e2e/model-faults.e2e-spec.ts.
 */
describe('OpenAiCompatibleProvider deadlines', () => {
  let fake: FakeFetch;

  beforeEach(() => {
    fake = new FakeFetch(OK);
  });

  function provider(options: Partial<OpenAiCompatibleProviderOptions> = {}) {
    return new OpenAiCompatibleProvider({
      baseURL: 'http://model.test/v1',
      fetch: fake.fetch,
      idleTimeoutMs: IDLE,
      maxRetries: 0,
      ...options,
    });
  }

  function request(extra: Partial<ChatRequest> = {}): ChatRequest {
    return {
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      signal: new AbortController().signal,
      ...extra,
    };
  }

  function expectSilent(out: Outcome, says: string | RegExp): ProviderError {
    expect(out.error).toBeInstanceOf(ProviderError);
    const error = out.error as ProviderError;
    expect(error.kind).toBe('disconnected');
    if (typeof says === 'string') expect(error.message).toContain(says);
    else expect(error.message).toMatch(says);
    return error;
  }

  it('gives up on an endpoint silent before its headers after the idle timeout', async () => {
    fake.enqueue(hangBeforeHeaders);

    const out = await collect(provider().stream(request()));

    const error = expectSilent(out, 'went silent for 0.1 s before answering');
    expect(error.message).toBe(
      'The model endpoint http://model.test/v1 went silent for 0.1 s before answering: check that the server is running and not overloaded, or raise the idle timeout',
    );
    expect(out.elapsedMs).toBeGreaterThanOrEqual(IDLE - 1);
    expect(fake.requests[0].signal?.aborted).toBe(true);
  });

  it('gives up on headers followed by nothing', async () => {
    // The idle window starts at the headers: a longer timeout keeps a CI stall before them from
    // reading as the budget's stop (as in the keep-alive case below).
    fake.enqueue(openStream());

    const out = await collect(provider({ idleTimeoutMs: 1000 }).stream(request()));

    expectSilent(out, 'went silent for 1 s before answering');
  });

  it('does not count SSE keep-alive comments as chunks', async () => {
    // Pings that counted would keep the idle timer from firing until the 2x budget ran out; an
    // idle stop tells they did not.
    const idle = 1000;
    fake.enqueue(openStream(': ping\n\n', { everyMs: idle / 10, text: ': ping\n\n' }));

    const out = await collect(provider({ idleTimeoutMs: idle }).stream(request()));

    expectSilent(out, 'went silent for 1 s before answering');
    expect(out.elapsedMs).toBeLessThan(2 * idle);
  });

  it('gives up between chunks, keeping the text so far, as a silence mid-answer', async () => {
    fake.enqueue(openStream(`data: ${chunk('Hel')}\n\n`));

    const out = await collect(provider({ maxRetries: 2 }).stream(request()));

    expect(out.text).toBe('Hel');
    expectSilent(out, 'went silent for 0.1 s in the middle of an answer');
    expect(fake.requests).toHaveLength(1);
  });

  it('shares one budget of 2x the idle timeout among the attempts before the first token', async () => {
    // A 1 s idle timeout, so that a CI stall of a tenth of a second cannot move the first
    // attempt's end past the budget's and leave one attempt instead of two.
    const idle = 1000;
    const silent = Array.from({ length: 10 }, () => hangBeforeHeaders);
    fake.enqueue(...silent);

    const out = await collect(
      provider({ idleTimeoutMs: idle, maxRetries: 9, baseDelayMs: 1, random: () => 0 }).stream(
        request(),
      ),
    );

    // The time said is the time spent: the 2 s budget, and on a loaded machine a little more.
    expectSilent(
      out,
      /went silent before answering \(no token within 2(\.\d)? s over 2 attempts\)/,
    );
    expect(out.elapsedMs).toBeLessThan(3 * idle);
    expect(fake.requests).toHaveLength(2);
  });

  it('counts the retry waits in the budget too', async () => {
    fake.enqueue(answerWith('{}', 'application/json', 500), hangBeforeHeaders, hangBeforeHeaders);
    const waits: number[] = [];

    const out = await collect(
      provider({
        maxRetries: 5,
        onRetry: (info) => waits.push(info.delayMs),
        random: () => 0,
        sleep: async () => {},
      }).stream(request()),
    );

    expectSilent(out, 'went silent');
    expect(waits.length).toBeGreaterThanOrEqual(1);
    // Within the 0.2 s budget (with room for a CI stall), not the five attempts' 0.5 s.
    expect(out.elapsedMs).toBeLessThan(5 * IDLE);
  });

  it('fails at once with the 429 diagnostic when Retry-After exceeds the budget left', async () => {
    fake.enqueue(() => new Response('{}', { status: 429, headers: { 'retry-after': '5' } }));
    const waits: number[] = [];

    const out = await collect(
      provider({ maxRetries: 2, onRetry: (info) => waits.push(info.delayMs) }).stream(request()),
    );

    expect(out.error).toMatchObject({ kind: 'rate-limit', status: 429 });
    expect(waits).toEqual([]);
    // Not the 5 s asked for (the bound leaves room for a CI stall).
    expect(out.elapsedMs).toBeLessThan(1000);
    expect(fake.requests).toHaveLength(1);
  });

  it('honours a Retry-After that fits the budget', async () => {
    fake.enqueue(() => new Response('{}', { status: 429, headers: { 'retry-after-ms': '30' } }));
    const waits: number[] = [];

    const out = await collect(
      provider({ maxRetries: 2, onRetry: (info) => waits.push(info.delayMs) }).stream(request()),
    );

    expect(out.error).toBeUndefined();
    expect(out.text).toBe('ok');
    expect(waits).toEqual([30]);
  });

  it("takes the request's idleTimeoutMs over the provider's", async () => {
    fake.enqueue(hangBeforeHeaders);

    const out = await collect(
      provider({ idleTimeoutMs: 60_000 }).stream(request({ idleTimeoutMs: 50 })),
    );

    expectSilent(out, 'went silent for 0.05 s before answering');
    // Not the provider's 60 s (the bound leaves room for a CI stall).
    expect(out.elapsedMs).toBeLessThan(1000);
  });

  it('defaults the idle timeout to 60 s', async () => {
    const p = new OpenAiCompatibleProvider({ baseURL: 'http://model.test/v1', fetch: fake.fetch });
    const controller = new AbortController();
    fake.enqueue(hangBeforeHeaders);
    const stalled = collect(p.stream(request({ signal: controller.signal })));
    const sent = await fake.nextRequest();
    // A shorter default would have given up a request left hanging for twice the test's idle.
    await new Promise((resolve) => setTimeout(resolve, 2 * IDLE));
    expect(sent.signal?.aborted).toBe(false);

    controller.abort();

    expect((await stalled).error).toBeInstanceOf(APIUserAbortError);
  });

  it('does not count the time the consumer takes between chunks as silence', async () => {
    fake.enqueue(sseAnswer([chunk('a'), chunk('b'), chunk('c', 'stop'), '[DONE]']));
    const text: string[] = [];

    for await (const piece of provider({ idleTimeoutMs: 30 }).stream(request())) {
      text.push(piece.contentDelta ?? '');
      // A slow consumer (the agent's hooks, a socket): longer than the idle timeout.
      await new Promise((resolve) => setTimeout(resolve, 60));
    }

    expect(text.join('')).toBe('abc');
  });

  it('an abort while waiting for the headers is an abort, and leaves no listener behind', async () => {
    fake.enqueue(hangBeforeHeaders);
    const controller = new AbortController();
    const pending = collect(provider().stream(request({ signal: controller.signal })));
    await fake.nextRequest();

    controller.abort();

    expect((await pending).error).toBeInstanceOf(APIUserAbortError);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
