import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { APIUserAbortError } from '@anthropic-ai/sdk';
import { FakeAnthropicServer } from '../../../support/fake-anthropic-server';
import type {
  ChatRequest,
  ChatStreamChunk,
  ModelMessage,
  ProviderUsage,
  ToolCall,
} from '../../../../src/contracts';
import { ProviderError } from '../../../../src/llm/provider-error';
import {
  AnthropicProvider,
  toAnthropicMessages,
  type AnthropicProviderOptions,
} from '../../../../src/llm/anthropic/anthropic.provider';

const FIXTURES = resolve(__dirname, '../../../fixtures/provider-streams/anthropic');

interface Collected {
  chunks: ChatStreamChunk[];
  text: string;
  reasoning: string;
  toolCalls: ToolCall[] | undefined;
  usages: ProviderUsage[];
  error?: unknown;
}

/** Reads a stream to its end or its error, keeping what came before the error. */
async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<Collected> {
  const out: Collected = { chunks: [], text: '', reasoning: '', toolCalls: undefined, usages: [] };
  try {
    for await (const chunk of stream) {
      out.chunks.push(chunk);
      out.text += chunk.contentDelta ?? '';
      out.reasoning += chunk.reasoningDelta ?? '';
      if (chunk.toolCalls?.length) out.toolCalls = chunk.toolCalls;
      if (chunk.usage) out.usages.push(chunk.usage);
    }
  } catch (error) {
    out.error = error;
  }
  return out;
}

const usage = (promptTokens: number, completionTokens: number, totalTokens: number) => ({
  promptTokens,
  completionTokens,
  totalTokens,
});

interface FixtureExpectation {
  text: string;
  reasoning: string;
  toolCalls?: Array<{ id: string; name: string; arguments: string }>;
  /** `undefined` when the stream ends in an error. */
  usage?: Required<ProviderUsage>;
  /** The `ProviderError` kind the stream ends with, if it fails. */
  errorKind?: string;
}

/** Expected content of every recorded stream, read off the files by hand. */
const FIXTURE_EXPECTATIONS: Record<string, FixtureExpectation> = {
  'anthropic-clear-thinking.1': {
    text: '925 ÷ 5 = 185',
    reasoning: 'The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185',
    usage: usage(69, 53, 122),
  },
  'anthropic-json-tool.1': {
    text: '',
    reasoning: '',
    toolCalls: [
      {
        id: 'toolu_01KFbKqPYSuAKujiL6mTfzYA',
        name: 'json',
        arguments:
          '{"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}',
      },
    ],
    usage: usage(849, 47, 896),
  },
  // Input tokens reported again (and higher) in message_delta win over message_start's.
  'anthropic-message-delta-input-tokens': { text: 'pong', reasoning: '', usage: usage(61, 2, 63) },
  // A refusal carries no content, only the stop reason and usage.
  'anthropic-refusal': { text: '', reasoning: '', usage: usage(18, 5, 23) },
  'anthropic-text': {
    text: "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?",
    reasoning: '',
    usage: usage(12, 30, 42),
  },
  'anthropic-tool-no-args': {
    text: "I'll update the issue list for you.",
    reasoning: '',
    toolCalls: [{ id: 'toolu_01QE1WLsSVp5hy5Q3GmGTmjP', name: 'updateIssueList', arguments: '{}' }],
    usage: usage(565, 48, 613),
  },
  // The repeated message_start of the same message is ignored (usage counted once).
  'duplicate-message-start': { text: 'Hello, World!', reasoning: '', usage: usage(17, 227, 244) },
  // A second message spliced in mid tool call: the thinking already streamed stays, then the
  // stream fails as malformed, with no half-assembled tool call and no usage.
  'spliced-message-start': {
    text: '',
    reasoning: 'I will call the tool.',
    errorKind: 'malformed-stream',
  },
};

const fixtureFiles = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('.chunks.txt'))
  .sort();

function fixtureLines(file: string): string[] {
  return readFileSync(join(FIXTURES, file), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
}

const user = (content: string, extra: Partial<ModelMessage> = {}): ModelMessage => ({
  role: 'user',
  content,
  ...extra,
});

const call = (id: string, name: string, args: string): ToolCall => ({
  id,
  type: 'function',
  function: { name, arguments: args },
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

describe('AnthropicProvider', () => {
  let server: FakeAnthropicServer;

  beforeEach(async () => {
    server = await FakeAnthropicServer.start();
  });

  afterEach(async () => {
    await server.close();
  });

  function provider(options: Partial<AnthropicProviderOptions> = {}) {
    return new AnthropicProvider({ baseURL: server.url, maxRetries: 0, ...options });
  }

  function request(extra: Partial<ChatRequest> = {}): ChatRequest {
    return {
      model: 'claude-sonnet-4-6',
      messages: [user('hi')],
      signal: new AbortController().signal,
      ...extra,
    };
  }

  describe('replaying recorded provider streams', () => {
    it('has an expectation for every fixture file', () => {
      expect(fixtureFiles.map((file) => file.replace(/\.chunks\.txt$/, ''))).toEqual(
        Object.keys(FIXTURE_EXPECTATIONS).sort(),
      );
    });

    it.each(fixtureFiles)('assembles text, reasoning, tool calls and usage of %s', async (file) => {
      const expected = FIXTURE_EXPECTATIONS[file.replace(/\.chunks\.txt$/, '')];
      server.enqueue({ raw: fixtureLines(file) });

      const got = await collect(provider().stream(request()));

      if (expected.errorKind) {
        expect(got.error).toBeInstanceOf(ProviderError);
        expect(got.error).toMatchObject({ kind: expected.errorKind });
      } else {
        expect(got.error).toBeUndefined();
      }
      expect(got.text).toBe(expected.text);
      expect(got.reasoning).toBe(expected.reasoning);
      expect(got.usages).toEqual(expected.usage ? [expected.usage] : []);
      const calls = got.toolCalls?.map((c) => ({ id: c.id, ...c.function }));
      expect(calls).toEqual(expected.toolCalls);
      for (const c of calls ?? []) expect(() => JSON.parse(c.arguments)).not.toThrow();
      expect(got.chunks.filter((c) => c.toolCalls).length).toBe(expected.toolCalls ? 1 : 0);
      if (expected.toolCalls) expect(got.chunks.at(-1)?.toolCalls).toBeDefined();
      for (const chunk of got.chunks) {
        expect(chunk.contentDelta).not.toBe('');
        expect(chunk.reasoningDelta).not.toBe('');
      }
      // One attempt: nothing here is retried.
      expect(server.requests).toHaveLength(1);
    });

    it.each(fixtureFiles.filter((file) => !file.startsWith('spliced')))(
      'answers a non-streaming call from %s alike',
      async (file) => {
        const expected = FIXTURE_EXPECTATIONS[file.replace(/\.chunks\.txt$/, '')];
        server.enqueue({ raw: fixtureLines(file) });

        const response = await provider().chat(request());

        expect(response.content).toBe(expected.text);
        expect(response.reasoningContent ?? '').toBe(expected.reasoning);
        expect(response.usage).toEqual(expected.usage);
        const calls = response.toolCalls?.map((c) => ({ id: c.id, ...c.function }));
        expect(calls?.map((c) => ({ ...c, arguments: JSON.parse(c.arguments) }))).toEqual(
          expected.toolCalls?.map((c) => ({ ...c, arguments: JSON.parse(c.arguments) })),
        );
      },
    );
  });

  describe('stream', () => {
    it('sends a streaming Messages API request with the API key and max_tokens', async () => {
      await collect(provider({ apiKey: 'sk-ant-test' }).stream(request()));

      expect(server.received[0].path).toBe('/v1/messages');
      // @anthropic-ai/sdk 1.x sends the key as a bearer token.
      expect(server.received[0].headers.authorization).toBe('Bearer sk-ant-test');
      expect(server.received[0].headers['anthropic-version']).toBeDefined();
      expect(server.requests[0]).toEqual({
        model: 'claude-sonnet-4-6',
        max_tokens: 8192,
        stream: true,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      });
    });

    it('accepts a base URL that ends in /v1', async () => {
      const got = await collect(provider({ baseURL: `${server.url}/v1/` }).stream(request()));

      expect(got.text).toBe('ok');
      expect(server.received[0].path).toBe('/v1/messages');
    });

    it('joins text split into many deltas, in order, then reports usage', async () => {
      const text = 'The quick brown fox jumps over the lazy dog, naïvely — 🦊!';
      server.enqueue({
        text,
        chunks: 20,
        usage: { input_tokens: 7, output_tokens: 11, cache_read_input_tokens: 3 },
      });

      const got = await collect(provider().stream(request()));

      expect(got.chunks.filter((c) => c.contentDelta).length).toBe(20);
      expect(got.text).toBe(text);
      // Cached input counts as prompt tokens: it fills the context window too.
      expect(got.usages).toEqual([usage(10, 11, 21)]);
      expect(got.chunks.at(-2)).toEqual({ usage: usage(10, 11, 21) });
      // Then the model that answered and why it stopped.
      expect(got.chunks.at(-1)).toEqual({
        responseModel: 'claude-sonnet-4-6',
        finishReason: 'end_turn',
      });
    });

    it('yields no usage chunk when the server reports none', async () => {
      server.enqueue({ text: 'no usage', chunks: 2, usage: null });

      const got = await collect(provider().stream(request()));

      expect(got.text).toBe('no usage');
      expect(got.usages).toEqual([]);
    });

    it('yields thinking as reasoning before the text', async () => {
      server.enqueue({ text: 'Four.', thinking: 'Two plus two is four.' });

      const got = await collect(provider().stream(request()));

      expect(got.chunks[0]).toEqual({ reasoningDelta: 'Two plus two is four.' });
      expect(got.text).toBe('Four.');
    });

    it('assembles several tool calls whose JSON is split at awkward places', async () => {
      const first = { city: 'Zürich', days: [1, 2], nested: { quote: 'say "hi"\n', e: 'é✓' } };
      server.enqueue({
        text: 'Let me check.',
        jsonChunks: 17,
        toolCalls: [
          { name: 'weather', arguments: first, id: 'toolu_a' },
          { name: 'clock', arguments: {} },
          { name: 'search', arguments: '{"q": "caf\\u00e9 \\"x\\""}', id: 'toolu_c' },
        ],
      });

      const got = await collect(provider().stream(request()));

      expect(got.text).toBe('Let me check.');
      expect(got.toolCalls?.map((c) => [c.id, c.function.name])).toEqual([
        ['toolu_a', 'weather'],
        ['toolu_fake_2', 'clock'],
        ['toolu_c', 'search'],
      ]);
      expect(JSON.parse(got.toolCalls![0].function.arguments)).toEqual(first);
      expect(got.toolCalls![1].function.arguments).toBe('{}');
      expect(JSON.parse(got.toolCalls![2].function.arguments)).toEqual({ q: 'café "x"' });
      expect(got.chunks.at(-1)?.toolCalls).toHaveLength(3);
    });

    it('assembles input_json_delta pieces per block index when blocks interleave', async () => {
      const line = (event: unknown) => JSON.stringify(event);
      const start = (index: number, id: string, name: string) =>
        line({
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id, name, input: {} },
        });
      const json = (index: number, partial_json: string) =>
        line({
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json },
        });
      server.enqueue({
        raw: [
          line({ type: 'message_start', message: { id: 'm', usage: { input_tokens: 5 } } }),
          start(1, 'toolu_second', 'search'),
          start(0, 'toolu_first', 'lookup'),
          json(1, '{"q'),
          json(0, '{"text": "a \\'),
          json(1, '": "caf\\u00'),
          json(0, '"quoted\\" ✓", '),
          json(1, 'e9"}'),
          json(0, '"n": 12}'),
          line({ type: 'content_block_stop', index: 0 }),
          line({ type: 'content_block_stop', index: 1 }),
          line({
            type: 'message_delta',
            delta: { stop_reason: 'tool_use' },
            usage: { output_tokens: 9 },
          }),
          line({ type: 'message_stop' }),
        ],
      });

      const got = await collect(provider().stream(request()));

      expect(got.error).toBeUndefined();
      expect(got.toolCalls?.map((c) => [c.id, c.function.name])).toEqual([
        ['toolu_first', 'lookup'],
        ['toolu_second', 'search'],
      ]);
      expect(JSON.parse(got.toolCalls![0].function.arguments)).toEqual({
        text: 'a "quoted" ✓',
        n: 12,
      });
      expect(JSON.parse(got.toolCalls![1].function.arguments)).toEqual({ q: 'café' });
      expect(got.usages).toEqual([usage(5, 9, 14)]);
    });

    it('finishes a held answer once the server releases it', async () => {
      server.enqueue({ hold: true, holdAfter: 4, text: 'first second', chunks: 2 });
      const iterator = provider().stream(request())[Symbol.asyncIterator]();

      expect((await iterator.next()).value).toEqual({ contentDelta: 'first ' });
      await server.nextRequest();
      expect(server.heldCount).toBe(1);
      server.release();

      expect((await iterator.next()).value).toEqual({ contentDelta: 'second' });
      expect((await iterator.next()).value).toEqual({ usage: usage(10, 5, 15) });
      expect((await iterator.next()).value).toEqual({
        responseModel: 'claude-sonnet-4-6',
        finishReason: 'end_turn',
      });
      expect((await iterator.next()).done).toBe(true);
    });
  });

  describe('chat', () => {
    it('returns content, thinking, tool calls and usage of a non-streaming answer', async () => {
      server.enqueue({
        text: 'Checking.',
        thinking: 'Need the weather.',
        toolCalls: [{ name: 'weather', arguments: { city: 'Oslo' }, id: 'toolu_1' }],
        usage: { input_tokens: 3, output_tokens: 2 },
      });

      const response = await provider().chat(request());

      expect(response).toEqual({
        content: 'Checking.',
        reasoningContent: 'Need the weather.',
        toolCalls: [call('toolu_1', 'weather', '{"city":"Oslo"}')],
        usage: usage(3, 2, 5),
        responseModel: 'claude-sonnet-4-6',
        finishReason: 'tool_use',
      });
      expect(server.requests[0].stream).toBe(false);
    });

    it('answers "ok" when nothing is queued', async () => {
      const response = await provider().chat(request());

      expect(response.content).toBe('ok');
      expect(response.reasoningContent).toBeUndefined();
      expect(response.toolCalls).toBeUndefined();
    });
  });

  describe('request mapping', () => {
    it('joins leading system messages into system and sends later ones in place', () => {
      const { system, messages } = toAnthropicMessages([
        { role: 'system', content: 'Be brief.' },
        { role: 'system', content: 'Speak French.', metadata: { bucket: 'x' } },
        user('hi', { metadata: { id: 'm1' } }),
        { role: 'assistant', content: 'Salut.' },
        { role: 'system', content: 'Answer again, shorter.' },
      ]);

      expect(system).toBe('Be brief.\n\nSpeak French.');
      expect(messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Salut.' }] },
        { role: 'user', content: [{ type: 'text', text: '[system] Answer again, shorter.' }] },
      ]);
    });

    it('maps tool calls to tool_use blocks and merges consecutive tool results', () => {
      const { messages } = toAnthropicMessages([
        user('go'),
        {
          role: 'assistant',
          content: '',
          reasoningContent: 'not sent',
          toolCalls: [call('toolu_1', 'a', '{"x":1}'), call('toolu_2', 'b', 'not json')],
        },
        { role: 'tool', content: '{"ok":true}', toolCallId: 'toolu_1' },
        { role: 'tool', content: 'done', toolCallId: 'toolu_2' },
        user('and now?'),
      ]);

      expect(messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'go' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_1', name: 'a', input: { x: 1 } },
            { type: 'tool_use', id: 'toolu_2', name: 'b', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '{"ok":true}' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: 'done' },
            { type: 'text', text: 'and now?' },
          ],
        },
      ]);
    });

    it('sends images as base64 or URL image blocks before the text', () => {
      const { messages } = toAnthropicMessages([
        user('look', {
          images: [
            'data:image/png;base64,AAAA',
            'https://example.com/a.jpg',
            'data:text/plain;base64,AAAA',
            'file:///tmp/x.png',
          ],
        }),
      ]);

      expect(messages[0].content).toEqual([
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/a.jpg' } },
        { type: 'text', text: 'look' },
      ]);
    });

    it('opens with a user turn and drops blank text blocks', () => {
      const { system, messages } = toAnthropicMessages([
        { role: 'assistant', content: 'Earlier answer.' },
        user('   '),
        user('next'),
      ]);

      expect(system).toBeUndefined();
      expect(messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: '(earlier conversation omitted)' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Earlier answer.' }] },
        { role: 'user', content: [{ type: 'text', text: 'next' }] },
      ]);
    });

    it('sends tools with input_schema and max_tokens from the request', async () => {
      const parameters = { type: 'object', properties: { q: { type: 'string' } } };

      await provider().chat(
        request({
          tools: [{ name: 'search', description: 'Searches.', parameters }],
          maxTokens: 300,
        }),
      );
      await provider().chat(request({ tools: [] }));

      expect(server.requests[0].tools).toEqual([
        { name: 'search', description: 'Searches.', input_schema: parameters },
      ]);
      expect(server.requests[0].max_tokens).toBe(300);
      expect(server.requests[1]).not.toHaveProperty('tools');
    });

    it('maps think to thinking with a budget only for models that reason', async () => {
      const p = provider();

      await p.chat(request({ model: 'claude-sonnet-4-6', think: true, maxTokens: 8192 }));
      await p.chat(request({ model: 'claude-3-5-haiku-latest', think: true }));
      await p.chat(request({ model: 'claude-opus-4-1', think: false }));
      await collect(p.stream(request({ model: 'claude-3-7-sonnet-latest', think: true })));
      await p.chat(request({ model: 'claude-sonnet-4-6', think: true, maxTokens: 1024 }));
      await provider({ adaptiveThinking: true }).chat(
        request({ model: 'claude-opus-4-6', think: true }),
      );

      expect(server.requests.map((body) => body.thinking)).toEqual([
        { type: 'enabled', budget_tokens: 4096 },
        undefined,
        undefined,
        { type: 'enabled', budget_tokens: 4096 },
        undefined,
        { type: 'adaptive' },
      ]);
    });

    it('sends the signed thinking of a tool-use answer back in the tool loop', async () => {
      server.enqueue({
        thinking: 'I need the clock.',
        toolCalls: [{ name: 'clock', arguments: {}, id: 'toolu_clock' }],
      });
      const p = provider();
      const first = await collect(p.stream(request({ think: true })));
      const messages: ModelMessage[] = [
        user('time?'),
        { role: 'assistant', content: '', toolCalls: first.toolCalls },
        { role: 'tool', content: '12:00', toolCallId: 'toolu_clock' },
      ];

      await collect(p.stream(request({ think: true, messages })));
      // Another provider never saw that answer: it turns thinking off rather than fail.
      await collect(provider().stream(request({ think: true, messages })));

      expect(server.requests[1].thinking).toEqual({ type: 'enabled', budget_tokens: 4096 });
      expect(server.requests[1].messages[1]).toEqual({
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I need the clock.', signature: 'sig' },
          { type: 'tool_use', id: 'toolu_clock', name: 'clock', input: {} },
        ],
      });
      expect(server.requests[2].thinking).toBeUndefined();
      expect(server.requests[2].messages[1].content).toEqual([
        { type: 'tool_use', id: 'toolu_clock', name: 'clock', input: {} },
      ]);
    });
  });

  describe('retries', () => {
    it('retries a 429 honouring Retry-After: 0, then streams the answer', async () => {
      server.enqueue({ status: 429, headers: { 'retry-after': '0' } }, { text: 'after the retry' });
      const retries: number[] = [];

      const got = await collect(
        provider({ maxRetries: 2, onRetry: (info) => retries.push(info.delayMs) }).stream(
          request(),
        ),
      );

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('after the retry');
      expect(server.requests).toHaveLength(2);
      expect(retries).toEqual([0]);
    });

    it('waits as long as Retry-After says, capped (no real waiting: injected sleep)', async () => {
      server.enqueue(
        { status: 529, headers: { 'retry-after': '3' } },
        { status: 503, headers: { 'retry-after': '120' } },
        { text: 'third time' },
      );
      const waits: number[] = [];
      const sleep = async (ms: number) => {
        waits.push(ms);
      };

      const got = await collect(
        provider({ maxRetries: 2, maxRetryDelayMs: 10_000, sleep }).stream(request()),
      );

      expect(got.text).toBe('third time');
      expect(waits).toEqual([3000, 10_000]);
    });

    it('gives up after maxRetries with a server error', async () => {
      server.enqueue({ status: 529 }, { status: 529 }, { status: 529 });

      const got = await collect(
        provider({ maxRetries: 2, sleep: async () => {} }).stream(request()),
      );

      expect(got.error).toMatchObject({ kind: 'server', status: 529 });
      expect((got.error as Error).message).toContain('is overloaded (529');
      expect(server.requests).toHaveLength(3);
    });

    it('retries a connection reset before the first token', async () => {
      server.enqueue({ text: 'lost', destroyAfter: 1 }, { text: 'second try' });

      const got = await collect(provider({ maxRetries: 1, baseDelayMs: 1 }).stream(request()));

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('second try');
      expect(server.requests).toHaveLength(2);
    });

    it('does not retry once tokens were streamed: an error event mid-answer ends the stream', async () => {
      const line = (event: unknown) => JSON.stringify(event);
      server.enqueue({
        raw: [
          line({ type: 'message_start', message: { id: 'm', usage: { input_tokens: 5 } } }),
          line({
            type: 'content_block_start',
            index: 0,
            content_block: { type: 'text', text: '' },
          }),
          line({
            type: 'content_block_delta',
            index: 0,
            delta: { type: 'text_delta', text: 'Par' },
          }),
          line({ type: 'error', error: { type: 'api_error', message: 'Internal server error' } }),
        ],
      });

      const got = await collect(provider({ maxRetries: 3, baseDelayMs: 1 }).stream(request()));

      expect(got.text).toBe('Par');
      expect(got.error).toBeInstanceOf(ProviderError);
      expect(got.error).toMatchObject({ kind: 'server' });
      expect((got.error as Error).message).toContain('api_error: Internal server error');
      expect(server.requests).toHaveLength(1);
    });

    it('does not retry a disconnect after tokens', async () => {
      server.enqueue({ text: 'cut off here', chunks: 3, destroyAfter: 5 });

      const got = await collect(provider({ maxRetries: 3, baseDelayMs: 1 }).stream(request()));

      expect(got.text).toBe('cut off ');
      expect(got.error).toMatchObject({ kind: 'disconnected' });
      expect(server.requests).toHaveLength(1);
    });

    it('stops waiting for a retry when aborted', async () => {
      server.enqueue({ status: 429, headers: { 'retry-after': '60' } });
      const controller = new AbortController();
      const pending = collect(
        provider({ maxRetries: 2, onRetry: () => controller.abort() }).stream(
          request({ signal: controller.signal }),
        ),
      );

      const got = await pending;

      expect(got.error).toBeInstanceOf(APIUserAbortError);
      expect(server.requests).toHaveLength(1);
    });
  });

  describe('failures', () => {
    const fail = async (p: AnthropicProvider, extra: Partial<ChatRequest> = {}) => {
      const got = await collect(p.stream(request(extra)));
      expect(got.error).toBeInstanceOf(ProviderError);
      const error = got.error as ProviderError;
      expect(error.message).not.toMatch(/\n/);
      return { error, got };
    };

    it('tells how to fix an unreachable endpoint', async () => {
      const port = await closedPort();
      const { error } = await fail(
        new AnthropicProvider({ baseURL: `http://127.0.0.1:${port}`, maxRetries: 0 }),
      );

      expect(error.kind).toBe('unreachable');
      expect(error.message).toBe(
        `The model endpoint http://127.0.0.1:${port} cannot be reached: check LLM_BASE_URL and that the server is running`,
      );
    });

    it('tells when the endpoint does not answer within the request timeout', async () => {
      server.enqueue({ status: 200, hold: true });

      const error = await provider({ timeoutMs: 50 })
        .chat(request())
        .catch((e: unknown) => e);

      expect(error).toMatchObject({ kind: 'unreachable' });
      expect((error as Error).message).toContain('did not answer within');
    });

    it('tells to check the API key on 401', async () => {
      server.enqueue({ status: 401 });

      const { error } = await fail(provider());

      expect(error).toMatchObject({ kind: 'auth', status: 401, retryable: false });
      expect(error.message).toContain('check LLM_API_KEY');
    });

    it('names the unknown model on 404', async () => {
      server.enqueue({
        status: 404,
        body: { type: 'error', error: { type: 'not_found_error', message: 'model: claude-nope' } },
      });

      const { error } = await fail(provider(), { model: 'claude-nope' });

      expect(error.kind).toBe('model-not-found');
      expect(error.message).toContain('"claude-nope"');
      expect(error.message).toContain('check LLM_MODEL');
    });

    it('recognises a prompt that exceeds the context window', async () => {
      server.enqueue({
        status: 400,
        body: {
          type: 'error',
          error: {
            type: 'invalid_request_error',
            message: 'prompt is too long: 215000 tokens > 200000 maximum',
          },
        },
      });

      const { error } = await fail(provider());

      expect(error.kind).toBe('context-length');
      expect(error.message).toContain('start a new session');
    });

    it('quotes the server on other bad requests', async () => {
      server.enqueue({
        status: 400,
        body: {
          type: 'error',
          error: { type: 'invalid_request_error', message: 'tools.0.name: bad. Use letters.' },
        },
      });

      const { error } = await fail(provider());

      expect(error.kind).toBe('bad-request');
      expect(error.message).toContain('tools.0.name: bad; Use letters');
    });

    it('reports a malformed JSON event', async () => {
      server.enqueue({
        raw: [
          JSON.stringify({ type: 'message_start', message: { id: 'm' } }),
          JSON.stringify({
            type: 'content_block_start',
            index: 0,
            content_block: { type: 'text', text: 'Hi' },
          }),
          '{"type": "content_block_delta", "index": 0, "delta": {',
        ],
        rawEvent: 'content_block_delta',
      });

      const { error, got } = await fail(provider());

      expect(got.text).toBe('Hi');
      expect(error.kind).toBe('malformed-stream');
      expect(error.message).toContain('Anthropic Messages API server');
    });

    it('reports a stream that ends cleanly before message_stop as a disconnect', async () => {
      server.enqueue({ text: 'half an answer', endAfter: 4 });

      const { error, got } = await fail(provider());

      expect(got.text).toBe('half an answer');
      expect(error.kind).toBe('disconnected');
      expect(got.usages).toEqual([]);
    });

    it('gives up on a stream that goes silent for longer than idleTimeoutMs', async () => {
      server.enqueue({ hold: true, holdAfter: 4, text: 'and then nothing', chunks: 2 });

      // 0.5 s, not less: a CI stall between the headers and the first chunk must not read as a
      // silence before the answer.
      const { error, got } = await fail(provider({ idleTimeoutMs: 500 }));

      expect(got.text).toBe('and then');
      expect(error.kind).toBe('disconnected');
      expect(error.message).toContain('went silent for 0.5 s in the middle of an answer');
    });

    it('throws APIUserAbortError when aborted mid-stream, and closes the connection', async () => {
      server.enqueue({ hold: true, holdAfter: 4, text: 'never finished', chunks: 2 });
      const controller = new AbortController();
      const iterator = provider()
        .stream(request({ signal: controller.signal }))
        [Symbol.asyncIterator]();
      expect((await iterator.next()).value).toEqual({ contentDelta: 'never f' });
      const disconnected = server.waitForDisconnect();

      controller.abort();

      await expect(iterator.next()).rejects.toBeInstanceOf(APIUserAbortError);
      await disconnected;
      expect(server.heldCount).toBe(0);
    });

    it('throws APIUserAbortError without a request when the signal is already aborted', async () => {
      const controller = new AbortController();
      controller.abort();

      const got = await collect(provider().stream(request({ signal: controller.signal })));

      expect(got.error).toBeInstanceOf(APIUserAbortError);
      await expect(provider().chat(request({ signal: controller.signal }))).rejects.toBeInstanceOf(
        APIUserAbortError,
      );
      expect(server.requests).toEqual([]);
    });

    it('maps errors of non-streaming calls alike', async () => {
      server.enqueue({ status: 401 });

      await expect(provider().chat(request())).rejects.toMatchObject({ kind: 'auth' });
    });
  });

  describe('capabilities, ping and loading', () => {
    it('reports the defaults, reasoning for Claude 3.7 and 4 models, and overrides', () => {
      const p = provider({
        defaultCapabilities: { contextWindow: 100_000 },
        capabilities: { 'claude-big': { contextWindow: 1_000_000 } },
      });

      expect(provider().capabilities('claude-3-5-haiku-latest')).toEqual({
        contextWindow: 200_000,
        maxOutputTokens: 8192,
        vision: true,
        tools: true,
        reasoning: false,
        encoding: 'cl100k_base',
      });
      for (const model of [
        'claude-3-7-sonnet-latest',
        'claude-sonnet-4-20250514',
        'claude-opus-4-1',
        'claude-haiku-4-5',
      ]) {
        expect(provider().capabilities(model).reasoning).toBe(true);
      }
      expect(p.capabilities('claude-x').contextWindow).toBe(100_000);
      expect(p.capabilities('claude-big').contextWindow).toBe(1_000_000);
    });

    it('takes id, default model and endpoint from the options', () => {
      const p = provider({ id: 'claude', defaultModel: 'claude-haiku-4-5' });

      expect([p.id, p.defaultModel, p.endpoint]).toEqual([
        'claude',
        'claude-haiku-4-5',
        server.url,
      ]);
      expect(new AnthropicProvider().endpoint).toBe('https://api.anthropic.com');
    });

    it('pings by listing the models, and throws when unreachable', async () => {
      await provider().ping();
      expect(server.received.at(-1)?.path).toBe('/v1/models');

      const port = await closedPort();
      await expect(
        new AnthropicProvider({ baseURL: `http://127.0.0.1:${port}` }).ping(),
      ).rejects.toThrow();
    });

    it('fails with one clear line when @anthropic-ai/sdk is not installed', () => {
      jest.isolateModules(() => {
        jest.doMock('@anthropic-ai/sdk', () => {
          const error = new Error("Cannot find module '@anthropic-ai/sdk' from 'x.ts'");
          (error as Error & { code: string }).code = 'MODULE_NOT_FOUND';
          throw error;
        });
        type Module = typeof import('../../../../src/llm/anthropic/anthropic.provider');
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const isolated = require('../../../../src/llm/anthropic/anthropic.provider') as Module;
        expect(() => new isolated.AnthropicProvider()).toThrow(
          'The Anthropic provider needs the @anthropic-ai/sdk package: run "npm install @anthropic-ai/sdk"',
        );
      });
      jest.dontMock('@anthropic-ai/sdk');
    });
  });
});
