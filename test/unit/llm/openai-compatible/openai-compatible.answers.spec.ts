import type { ChatRequest, ChatStreamChunk, ToolCall } from '../../../../src/contracts';
import { ProviderError } from '../../../../src/llm/provider-error';
import { OpenAiCompatibleProvider } from '../../../../src/llm/openai-compatible/openai-compatible.provider';
import { answerWith, FakeFetch, sseAnswer } from '../../../support/fake-fetch';

interface Collected {
  chunks: ChatStreamChunk[];
  text: string;
  reasoning: string;
  toolCalls?: ToolCall[];
  usage?: ChatStreamChunk['usage'];
  error?: unknown;
}

async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<Collected> {
  const out: Collected = { chunks: [], text: '', reasoning: '' };
  try {
    for await (const chunk of stream) {
      out.chunks.push(chunk);
      out.text += chunk.contentDelta ?? '';
      out.reasoning += chunk.reasoningDelta ?? '';
      if (chunk.toolCalls) out.toolCalls = chunk.toolCalls;
      if (chunk.usage) out.usage = chunk.usage;
    }
  } catch (error) {
    out.error = error;
  }
  return out;
}

const chunk = (content: string, finish: string | null = null) =>
  JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: finish }] });

/** A whole chat completion, as a proxy that ignores `stream: true` answers. */
const completion = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 0,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }],
    ...extra,
  });

/**
 * What a 200 answer to a streaming request can really be (an event stream, a JSON completion,
 * an HTML login page, nothing at all) and what the provider makes of it.
 */
describe('OpenAiCompatibleProvider answers that are not streams', () => {
  let fake: FakeFetch;

  beforeEach(() => {
    fake = new FakeFetch(sseAnswer([chunk('ok', 'stop'), '[DONE]']));
  });

  const stream = (extra: Partial<ChatRequest> = {}) =>
    new OpenAiCompatibleProvider({
      baseURL: 'http://model.test/v1',
      fetch: fake.fetch,
      maxRetries: 2,
      baseDelayMs: 1,
    }).stream({
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      signal: new AbortController().signal,
      ...extra,
    });

  async function fails(): Promise<ProviderError> {
    const got = await collect(stream());
    expect(got.error).toBeInstanceOf(ProviderError);
    return got.error as ProviderError;
  }

  describe('a JSON chat completion is the answer', () => {
    it('yields its reasoning, content and usage as chunks', async () => {
      fake.enqueue(
        answerWith(
          completion(
            { content: 'Paris.', reasoning_content: 'The capital of France.' },
            { usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } },
          ),
          'application/json',
        ),
      );

      const got = await collect(stream());

      expect(got.error).toBeUndefined();
      expect(got.chunks).toEqual([
        { reasoningDelta: 'The capital of France.' },
        { contentDelta: 'Paris.' },
        { usage: { promptTokens: 9, completionTokens: 2, totalTokens: 11 } },
        { responseModel: 'test-model', finishReason: 'stop' },
      ]);
    });

    it('yields its tool calls, assembled', async () => {
      fake.enqueue(
        answerWith(
          completion({
            content: null,
            tool_calls: [
              {
                id: 'call_a',
                type: 'function',
                function: { name: 'clock', arguments: '{"zone":"UTC"}' },
              },
              { id: 'call_b', type: 'function', function: { name: 'search', arguments: '' } },
            ],
          }),
          'application/json; charset=utf-8',
        ),
      );

      const got = await collect(stream());

      expect(got.text).toBe('');
      expect(got.toolCalls).toEqual([
        {
          id: 'call_a',
          type: 'function',
          function: { name: 'clock', arguments: '{"zone":"UTC"}' },
        },
        { id: 'call_b', type: 'function', function: { name: 'search', arguments: '{}' } },
      ]);
    });

    it('reads Mistral-style content parts (text and thinking)', async () => {
      fake.enqueue(
        answerWith(
          completion({
            content: [
              { type: 'thinking', thinking: [{ type: 'text', text: 'hmm' }] },
              { type: 'text', text: 'done' },
            ],
          }),
          'application/json',
        ),
      );

      const got = await collect(stream());

      expect(got).toMatchObject({ text: 'done', reasoning: 'hmm' });
    });

    it('reports a JSON error object as the server’s error (retried), not as an answer', async () => {
      const failed = answerWith(
        JSON.stringify({ error: { message: 'upstream timed out', type: 'server_error' } }),
        'application/json',
      );
      fake.enqueue(failed, failed, failed);

      const error = await fails();

      expect(fake.requests).toHaveLength(3);
      expect(error.kind).toBe('server');
      expect(error.message).toContain('server_error: upstream timed out');
    });

    it('reports JSON that does not parse as a malformed answer, not retried', async () => {
      fake.enqueue(answerWith('{"choices": [', 'application/json'));

      const error = await fails();

      expect(error.kind).toBe('malformed-stream');
      expect(error.message).toContain('(a JSON answer that does not parse)');
      expect(fake.requests).toHaveLength(1);
    });

    it('reports JSON that is not a completion as a malformed answer', async () => {
      fake.enqueue(answerWith('{"status":"ok"}', 'application/json'));

      const error = await fails();

      expect(error.kind).toBe('malformed-stream');
      expect(error.message).toContain('(a JSON answer that is not a chat completion)');
    });
  });

  describe('any other content type fails, naming it', () => {
    it.each([
      ['text/html; charset=utf-8', 'text/html', '<!doctype html><form>Sign in</form>'],
      ['text/plain', 'text/plain', 'Service temporarily unavailable'],
      ['application/x-ndjson', 'application/x-ndjson', '{"message":{"content":"hi"}}\n'],
    ])('%s: one sentence saying to check LLM_BASE_URL, not retried', async (type, named, body) => {
      fake.enqueue(answerWith(body, type));

      const error = await fails();

      expect(error.kind).toBe('malformed-stream');
      expect(error.retryable).toBe(false);
      expect(error.message).toBe(
        `The model endpoint http://model.test/v1 answered ${named} instead of a stream: check that LLM_BASE_URL is the address of an OpenAI-compatible server`,
      );
      expect(fake.requests).toHaveLength(1);
    });
  });

  describe('empty and unfinished bodies', () => {
    it.each([['text/event-stream'], ['application/json'], ['text/html'], [null]])(
      'an empty 200 body (%s) is an empty answer',
      async (type) => {
        fake.enqueue(answerWith('', type));

        const got = await collect(stream());

        expect(got.error).toBeUndefined();
        expect(got.chunks).toEqual([]);
        expect(fake.requests).toHaveLength(1);
      },
    );

    it('reads an event stream sent without a content type', async () => {
      fake.enqueue(answerWith(`data: ${chunk('plain', 'stop')}\n\ndata: [DONE]\n\n`, null));

      const got = await collect(stream());

      expect(got.text).toBe('plain');
    });

    it('takes a finished stream without [DONE] as the answer', async () => {
      fake.enqueue(sseAnswer([chunk('all'), chunk(' of it', 'stop')]));

      const got = await collect(stream());

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('all of it');
    });

    it('ends an unfinished stream without [DONE] with the text so far, then "disconnected"', async () => {
      fake.enqueue(sseAnswer([chunk('half')]));

      const got = await collect(stream());

      expect(got.text).toBe('half');
      expect(got.error).toMatchObject({ kind: 'disconnected' });
      expect(fake.requests).toHaveLength(1);
    });

    it('fails on a malformed chunk with the malformed-stream diagnostic', async () => {
      fake.enqueue(sseAnswer([chunk('Hi'), '{"choices": [']));

      const got = await collect(stream());

      expect(got.text).toBe('Hi');
      expect(got.error).toMatchObject({ kind: 'malformed-stream' });
      expect((got.error as Error).message).toContain('(a chunk is not valid JSON)');
    });
  });
});
