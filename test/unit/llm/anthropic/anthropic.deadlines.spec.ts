import { getEventListeners } from 'node:events';
import type { ChatRequest, ChatStreamChunk } from '../../../../src/contracts';
import { ProviderError } from '../../../../src/llm/provider-error';
import {
  AnthropicProvider,
  type AnthropicProviderOptions,
} from '../../../../src/llm/anthropic/anthropic.provider';
import { FakeFetch, hangBeforeHeaders, openStream } from '../../../support/fake-fetch';

/** One Messages API SSE event. */
const event = (data: { type: string } & Record<string, unknown>) =>
  `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;

const START = event({ type: 'message_start', message: { id: 'm', usage: { input_tokens: 1 } } });
const TEXT = (text: string) =>
  event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text } });
const STOP = event({ type: 'message_stop' });

const IDLE = 100;

async function collect(stream: AsyncIterable<ChatStreamChunk>) {
  const started = performance.now();
  const out: { text: string; error?: unknown; elapsedMs: number } = { text: '', elapsedMs: 0 };
  try {
    for await (const chunk of stream) out.text += chunk.contentDelta ?? '';
  } catch (error) {
    out.error = error;
  }
  out.elapsedMs = performance.now() - started;
  return out;
}

/** The deadlines of the OpenAI-compatible provider hold for the Anthropic one too. */
describe('AnthropicProvider deadlines', () => {
  let fake: FakeFetch;

  beforeEach(() => {
    fake = new FakeFetch(openStream(START + TEXT('ok') + STOP));
  });

  function provider(options: Partial<AnthropicProviderOptions> = {}) {
    return new AnthropicProvider({
      baseURL: 'http://model.test',
      fetch: fake.fetch,
      idleTimeoutMs: IDLE,
      maxRetries: 0,
      ...options,
    });
  }

  const request = (extra: Partial<ChatRequest> = {}): ChatRequest => ({
    model: 'claude-test',
    messages: [{ role: 'user', content: 'hi' }],
    signal: new AbortController().signal,
    ...extra,
  });

  it('gives up on an endpoint silent before its headers after the idle timeout', async () => {
    fake.enqueue(hangBeforeHeaders);

    const out = await collect(provider().stream(request()));

    expect(out.error).toBeInstanceOf(ProviderError);
    expect((out.error as Error).message).toBe(
      'The model endpoint http://model.test went silent for 0.1 s before answering: check that the server is running and not overloaded, or raise the idle timeout',
    );
  });

  it('does not count ping events as chunks', async () => {
    // The idle window starts at the headers: a longer timeout than the other cases keeps a CI
    // stall before them from reading as the 2x budget's stop, which pings that counted would cause.
    const idle = 1000;
    const ping = event({ type: 'ping' });
    fake.enqueue(openStream(ping, { everyMs: idle / 10, text: ping }));

    const out = await collect(provider({ idleTimeoutMs: idle }).stream(request()));

    expect(out.error).toMatchObject({ kind: 'disconnected' });
    expect((out.error as Error).message).toContain('went silent for 1 s before answering');
  });

  it('gives up between events as a silence mid-answer, keeping the text so far', async () => {
    fake.enqueue(openStream(START + TEXT('Hel')));

    const out = await collect(provider({ maxRetries: 2 }).stream(request()));

    expect(out.text).toBe('Hel');
    expect((out.error as Error).message).toContain(
      'went silent for 0.1 s in the middle of an answer',
    );
    expect(fake.requests).toHaveLength(1);
  });

  it('shares one budget of 2x the idle timeout among the attempts before the first token', async () => {
    // A 1 s idle timeout, so that a CI stall of a tenth of a second cannot move the first
    // attempt's end past the budget's and leave one attempt instead of two.
    const idle = 1000;
    fake.enqueue(...Array.from({ length: 10 }, () => hangBeforeHeaders));

    const out = await collect(
      provider({ idleTimeoutMs: idle, maxRetries: 9, baseDelayMs: 1, random: () => 0 }).stream(
        request(),
      ),
    );

    // The time said is the time spent: the 2 s budget, and on a loaded machine a little more.
    expect((out.error as Error).message).toMatch(
      /went silent before answering \(no token within 2(\.\d)? s over 2 attempts\)/,
    );
    expect(out.elapsedMs).toBeLessThan(3 * idle);
  });

  it("takes the request's idleTimeoutMs over the provider's", async () => {
    fake.enqueue(hangBeforeHeaders);

    const out = await collect(
      provider({ idleTimeoutMs: 60_000 }).stream(request({ idleTimeoutMs: 50 })),
    );

    expect((out.error as Error).message).toContain('went silent for 0.05 s before answering');
  });

  it('leaves no listener on the caller’s signal, streamed or not', async () => {
    const controller = new AbortController();
    const p = provider();

    expect((await collect(p.stream(request({ signal: controller.signal })))).text).toBe('ok');
    fake.enqueue(() =>
      Response.json({
        id: 'm',
        type: 'message',
        role: 'assistant',
        content: [{ type: 'text', text: 'whole' }],
        usage: { input_tokens: 1, output_tokens: 1 },
      }),
    );
    expect((await p.chat(request({ signal: controller.signal }))).content).toBe('whole');

    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
