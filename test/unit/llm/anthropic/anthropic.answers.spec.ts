import type { ChatStreamChunk } from '../../../../src/contracts';
import { AnthropicProvider } from '../../../../src/llm/anthropic/anthropic.provider';
import { answerWith, FakeFetch } from '../../../support/fake-fetch';

async function collect(stream: AsyncIterable<ChatStreamChunk>) {
  const out: { chunks: ChatStreamChunk[]; text: string; error?: unknown } = {
    chunks: [],
    text: '',
  };
  try {
    for await (const chunk of stream) {
      out.chunks.push(chunk);
      out.text += chunk.contentDelta ?? '';
    }
  } catch (error) {
    out.error = error;
  }
  return out;
}

/** What the Anthropic provider makes of a 200 answer to a streaming request that is no stream. */
describe('AnthropicProvider answers that are not streams', () => {
  let fake: FakeFetch;

  beforeEach(() => {
    fake = new FakeFetch(answerWith('', 'text/event-stream'));
  });

  const stream = () =>
    new AnthropicProvider({
      baseURL: 'http://model.test',
      fetch: fake.fetch,
      maxRetries: 0,
    }).stream({
      model: 'claude-test',
      messages: [{ role: 'user', content: 'hi' }],
      signal: new AbortController().signal,
    });

  it('takes a JSON message as the answer: thinking, text, tool calls and usage', async () => {
    fake.enqueue(
      answerWith(
        JSON.stringify({
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Look it up.', signature: 'sig' },
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'clock', input: { zone: 'UTC' } },
          ],
          stop_reason: 'tool_use',
          usage: { input_tokens: 12, output_tokens: 4 },
        }),
        'application/json',
      ),
    );

    const got = await collect(stream());

    expect(got.error).toBeUndefined();
    expect(got.chunks).toEqual([
      { reasoningDelta: 'Look it up.' },
      { contentDelta: 'Checking.' },
      { usage: { promptTokens: 12, completionTokens: 4, totalTokens: 16 } },
      {
        toolCalls: [
          {
            id: 'toolu_1',
            type: 'function',
            function: { name: 'clock', arguments: '{"zone":"UTC"}' },
          },
        ],
      },
    ]);
  });

  it('reports a JSON error body as the API’s error', async () => {
    fake.enqueue(
      answerWith(
        JSON.stringify({
          type: 'error',
          error: { type: 'overloaded_error', message: 'Overloaded' },
        }),
        'application/json',
      ),
    );

    const got = await collect(stream());

    expect(got.error).toMatchObject({ kind: 'server' });
    expect((got.error as Error).message).toContain('overloaded_error: Overloaded');
  });

  it('fails on an HTML page naming its content type and LLM_BASE_URL, not retried', async () => {
    fake.enqueue(answerWith('<html>Sign in</html>', 'text/html'));

    const got = await collect(stream());

    expect(got.error).toMatchObject({ kind: 'malformed-stream', retryable: false });
    expect((got.error as Error).message).toBe(
      'The model endpoint http://model.test answered text/html instead of a stream: check that LLM_BASE_URL is the address of an Anthropic Messages API server',
    );
  });

  it('reports an empty body as an answer cut off', async () => {
    const got = await collect(stream());

    expect(got.error).toMatchObject({ kind: 'disconnected' });
  });
});
