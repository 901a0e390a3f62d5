import { OpenAiCompatibleProvider, ProviderError } from '../../src/llm';
import type { ChatStreamChunk, ToolCall } from '../../src/contracts';
import { FakeOpenAiServer, type FakeScript } from '../../src/testing';

/**
 * The fault matrix of a model endpoint, against a real local HTTP server: each way an endpoint
 * or a proxy in front of it misbehaves ends the call within its bound (measured, not slept),
 * with an actionable ProviderError or the answer, and the next call on the same provider works.
 */

/** The idle timeout of every row: short, so silent rows end quickly. */
const IDLE = 300;
/** A silent endpoint fails within the budget of the attempts before the first token: 2 × idle. */
const SILENT_BOUND = 2 * IDLE + 200;
/** A row that involves no timer: it must end well before any idle timeout could fire. */
const FAST_BOUND = IDLE;

interface Outcome {
  text: string;
  reasoning: string;
  toolCalls?: ToolCall[];
  usage?: ChatStreamChunk['usage'];
  chunks: number;
  error?: ProviderError;
  elapsedMs: number;
}

describe('model endpoint faults (OpenAI-compatible provider, real HTTP)', () => {
  let server: FakeOpenAiServer;
  let provider: OpenAiCompatibleProvider;

  beforeAll(async () => {
    server = await FakeOpenAiServer.start();
  });

  afterAll(async () => {
    await server.close();
  });

  beforeEach(() => {
    // The SDK's default retries; no jitter, so every row makes all the retries the budget allows.
    provider = new OpenAiCompatibleProvider({
      baseURL: server.url,
      idleTimeoutMs: IDLE,
      maxRetries: 2,
      baseDelayMs: 1,
      random: () => 0,
    });
  });

  afterEach(async () => {
    // Scripts of retries a row did not make would answer the next row.
    server.discardScripts();
    // The next call on the same provider works.
    const next = await call();
    expect(next.error).toBeUndefined();
    expect(next.text).toBe('ok');
  });

  /** Streams one call to its end or its error, timing it. */
  async function call(): Promise<Outcome> {
    const out: Outcome = { text: '', reasoning: '', chunks: 0, elapsedMs: 0 };
    const started = performance.now();
    try {
      for await (const chunk of provider.stream({
        model: 'test-model',
        messages: [{ role: 'user', content: 'hi' }],
        signal: new AbortController().signal,
      })) {
        out.chunks++;
        out.text += chunk.contentDelta ?? '';
        out.reasoning += chunk.reasoningDelta ?? '';
        if (chunk.toolCalls) out.toolCalls = chunk.toolCalls;
        if (chunk.usage) out.usage = chunk.usage;
      }
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error;
      out.error = error;
    }
    out.elapsedMs = performance.now() - started;
    return out;
  }

  /** Queues `script` for the first attempt and each retry. */
  function everyAttempt(script: FakeScript): void {
    server.enqueue(script, script, script);
  }

  /** Expects a one-sentence error of `kind` saying `says`; returns it. */
  function expectError(out: Outcome, kind: string, says: string | RegExp): ProviderError {
    expect(out.error).toBeInstanceOf(ProviderError);
    const error = out.error!;
    expect(error.kind).toBe(kind);
    expect(error.message).toMatch(says);
    expect(error.message).not.toMatch(/\n|\.$/);
    return error;
  }

  const silentBeforeAnswer = new RegExp(
    `^The model endpoint http://127\\.0\\.0\\.1:\\d+/v1 went silent (?:for [\\d.]+ s before answering|before answering \\(no token within [\\d.]+ s over \\d attempts\\)): check that the server is running and not overloaded, or raise the idle timeout$`,
  );

  it('hang before headers: fails within 2x the idle timeout, saying the endpoint went silent', async () => {
    everyAttempt({ fault: 'hang-before-headers' });

    const out = await call();

    expectError(out, 'disconnected', silentBeforeAnswer);
    expect(out.elapsedMs).toBeGreaterThanOrEqual(IDLE);
    expect(out.elapsedMs).toBeLessThan(SILENT_BOUND);
  });

  it('headers then nothing: fails within 2x the idle timeout, saying the endpoint went silent', async () => {
    everyAttempt({ fault: 'headers-then-silence' });

    const out = await call();

    expectError(out, 'disconnected', silentBeforeAnswer);
    expect(out.elapsedMs).toBeLessThan(SILENT_BOUND);
  });

  it('keep-alive comments only: fails within 2x the idle timeout, comments are not an answer', async () => {
    everyAttempt({ fault: 'keep-alive-only', pingEveryMs: IDLE / 6 });

    const out = await call();

    expectError(out, 'disconnected', silentBeforeAnswer);
    expect(out.elapsedMs).toBeLessThan(SILENT_BOUND);
  });

  it('hang mid-stream: keeps the text so far and fails one idle timeout after the last chunk', async () => {
    server.enqueue({ fault: 'hang-mid-stream', text: 'Hello there', chunks: 2 });

    const out = await call();

    expect(out.text).toBe('Hello');
    expectError(
      out,
      'disconnected',
      /went silent for 0\.3 s in the middle of an answer: try again/,
    );
    expect(out.elapsedMs).toBeGreaterThanOrEqual(IDLE);
    expect(out.elapsedMs).toBeLessThan(IDLE + 200);
    expect(server.pending).toBe(0);
  });

  it('malformed chunk: fails at once with the malformed-stream diagnostic, no retry', async () => {
    everyAttempt({ raw: ['{"choices":[{"index":0,"delta":{"content":"Hi"}}]}', '{oops'] });

    const out = await call();

    expect(out.text).toBe('Hi');
    expectError(
      out,
      'malformed-stream',
      'sent a malformed stream (a chunk is not valid JSON): check that LLM_BASE_URL is the address of an OpenAI-compatible server',
    );
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it('disconnect mid-stream: keeps the text so far and fails at once, no retry after tokens', async () => {
    everyAttempt({ fault: 'disconnect-mid-stream', text: 'Hello there', chunks: 2 });

    const out = await call();

    expect(out.text).toBe('Hello');
    expectError(out, 'disconnected', 'closed the connection before the answer was complete');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it.each([
    {
      status: 401,
      kind: 'auth',
      says: 'rejected the API key (401 Unauthorized): check LLM_API_KEY',
    },
    { status: 403, kind: 'auth', says: 'refused access (403 Forbidden' },
    { status: 404, kind: 'model-not-found', says: 'does not know the model "test-model" (404)' },
  ])('$status: fails at once, not retried ($kind)', async ({ status, kind, says }) => {
    everyAttempt({ status });

    const out = await call();

    expectError(out, kind, says);
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it('context-length 400: fails at once saying the conversation is too long', async () => {
    everyAttempt({
      status: 400,
      body: { error: { message: 'too long', code: 'context_length_exceeded' } },
    });

    const out = await call();

    expectError(out, 'context-length', 'too long for the context window of model "test-model"');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it('429 with a Retry-After beyond the budget: fails now with the rate-limit diagnostic', async () => {
    everyAttempt({ status: 429, headers: { 'retry-after': '60' } });

    const out = await call();

    expectError(out, 'rate-limit', 'is rate-limiting requests (429): wait a minute');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it('429 with a Retry-After within the budget: waits it, retries and answers', async () => {
    server.enqueue(
      { status: 429, headers: { 'retry-after-ms': String(IDLE / 3) } },
      { text: 'after the wait' },
    );

    const out = await call();

    expect(out.error).toBeUndefined();
    expect(out.text).toBe('after the wait');
    expect(out.elapsedMs).toBeGreaterThanOrEqual(IDLE / 3);
    expect(out.elapsedMs).toBeLessThan(SILENT_BOUND);
  });

  it.each([
    { status: 500, says: 'failed (500: Fake error 500): try again in a moment' },
    { status: 503, says: 'failed (503: Fake error 503): try again in a moment' },
  ])('$status: retried, then fails with the server diagnostic', async ({ status, says }) => {
    everyAttempt({ status });

    const out = await call();

    expectError(out, 'server', says);
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(0);
  });

  it('200 JSON instead of a stream: the completion is the answer (text, reasoning, tool calls, usage)', async () => {
    server.enqueue({
      ignoreStream: true,
      text: 'whole answer',
      toolCalls: [{ name: 'clock', arguments: { zone: 'UTC' }, id: 'call_1' }],
      usage: { prompt_tokens: 7, completion_tokens: 3 },
    });
    server.enqueue({ ignoreStream: true, text: 'thought through', reasoning: 'because' });

    const out = await call();

    expect(out.error).toBeUndefined();
    expect(out.text).toBe('whole answer');
    expect(out.toolCalls).toEqual([
      { id: 'call_1', type: 'function', function: { name: 'clock', arguments: '{"zone":"UTC"}' } },
    ]);
    expect(out.usage).toEqual({ promptTokens: 7, completionTokens: 3, totalTokens: 10 });
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);

    const reasoned = await call();
    expect(reasoned).toMatchObject({ text: 'thought through', reasoning: 'because' });
  });

  it('200 HTML instead of a stream: fails at once naming the content type and LLM_BASE_URL', async () => {
    everyAttempt({
      status: 200,
      body: '<!doctype html><title>Sign in</title>',
      headers: { 'content-type': 'text/html; charset=utf-8' },
    });

    const out = await call();

    expectError(
      out,
      'malformed-stream',
      /^The model endpoint http:\/\/127\.0\.0\.1:\d+\/v1 answered text\/html instead of a stream: check that LLM_BASE_URL is the address of an OpenAI-compatible server$/,
    );
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
    expect(server.pending).toBe(2);
  });

  it('200 text/plain instead of a stream: fails naming the content type', async () => {
    everyAttempt({ status: 200, body: 'Bad gateway', headers: { 'content-type': 'text/plain' } });

    const out = await call();

    expectError(out, 'malformed-stream', 'answered text/plain instead of a stream');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
  });

  it('empty 200 body: an empty answer, at once', async () => {
    everyAttempt({ status: 200, body: '', headers: { 'content-type': 'text/event-stream' } });

    const out = await call();

    expect(out.error).toBeUndefined();
    expect(out).toMatchObject({ text: '', chunks: 0 });
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
  });

  it('no [DONE] after a finished answer: the answer, at once', async () => {
    server.enqueue({ fault: 'no-done', text: 'all of it', chunks: 3 });

    const out = await call();

    expect(out.error).toBeUndefined();
    expect(out.text).toBe('all of it');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
  });

  it('clean close mid-answer (no finish, no [DONE]): the text so far, then "disconnected"', async () => {
    everyAttempt({ fault: 'cut-without-finish', text: 'Hello there', chunks: 2 });

    const out = await call();

    expect(out.text).toBe('Hello');
    expectError(out, 'disconnected', 'closed the connection before the answer was complete');
    expect(out.elapsedMs).toBeLessThan(FAST_BOUND);
  });
});
