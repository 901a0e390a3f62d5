import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { LlmProvider } from '../../../src/contracts';
import { AnthropicProvider } from '../../../src/llm/anthropic/anthropic.provider';
import { OpenAiCompatibleProvider } from '../../../src/llm/openai-compatible/openai-compatible.provider';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const CALLS = 5_000;
/** Enough calls for the JIT, inline caches and lazily built SDK internals to settle. */
const WARM_UP = 2_000;
const MAX_GROWTH_BYTES = 1024 * 1024;

/** An SSE answer of `data:` payloads, as the bytes of one response. */
function sse(events: Array<{ event?: string; data: unknown }>): Uint8Array {
  const text = events
    .map(
      ({ event, data }) => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`,
    )
    .join('');
  return new TextEncoder().encode(text);
}

const OPENAI_STREAM = new Uint8Array([
  ...sse([
    { data: { id: 'c', choices: [{ index: 0, delta: { role: 'assistant', content: 'ok' } }] } },
    { data: { id: 'c', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] } },
    { data: { id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } } },
  ]),
  ...new TextEncoder().encode('data: [DONE]\n\n'),
]);

const ANTHROPIC_STREAM = sse(
  [
    { type: 'message_start', message: { id: 'm', usage: { input_tokens: 3, output_tokens: 0 } } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ok' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 1 } },
    { type: 'message_stop' },
  ].map((data) => ({ event: data.type, data })),
);

/** A `fetch` answering every request with `body` as an event stream. */
const streaming = (body: Uint8Array) => async () =>
  new Response(body, { headers: { 'content-type': 'text/event-stream' } });

/** The heap in use once the garbage is collected. */
async function settledHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    // Lets finalizers and pending callbacks run between collections.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed;
}

/** Runs `count` streamed calls one after the other, all under one long-lived caller signal. */
async function calls(provider: LlmProvider, signal: AbortSignal, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    let text = '';
    for await (const chunk of provider.stream!({
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      signal,
    })) {
      text += chunk.contentDelta ?? '';
    }
    if (text !== 'ok') throw new Error(`call ${i} answered ${JSON.stringify(text)}`);
  }
}

/**
 * Memory per model call is bounded: nothing allocated for a call outlives it. A long-lived
 * caller signal (a session's, say) used to keep every call's combined abort signal, SDK
 * listeners and what they reach alive: about 2 kB per call, 10 MB per 5,000 calls.
 */
describe('memory per model call', () => {
  jest.setTimeout(60_000);

  it.each([
    [
      'OpenAiCompatibleProvider',
      () =>
        new OpenAiCompatibleProvider({
          baseURL: 'http://model.test/v1',
          fetch: streaming(OPENAI_STREAM),
        }),
    ],
    [
      'AnthropicProvider',
      () =>
        new AnthropicProvider({
          baseURL: 'http://model.test',
          fetch: streaming(ANTHROPIC_STREAM),
        }),
    ],
  ])(
    '%s: 5,000 calls under one caller signal retain under 1 MB and leave no listener on it',
    async (_name, create) => {
      const provider = create();
      const caller = new AbortController();
      await calls(provider, caller.signal, WARM_UP);

      const before = await settledHeap();
      await calls(provider, caller.signal, CALLS);
      const growth = (await settledHeap()) - before;

      expect(growth).toBeLessThan(MAX_GROWTH_BYTES);
      expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    },
  );
});
