import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { APIError, APIUserAbortError } from 'openai';
import { FakeOpenAiServer } from '../../../../src/testing';
import type { ChatRequest, ChatStreamChunk, ProviderUsage } from '../../../../src/contracts/llm';
import type { ModelMessage, ToolCall } from '../../../../src/contracts/messages';
import { ProviderError } from '../../../../src/llm/provider-error';
import {
  OpenAiCompatibleProvider,
  type OpenAiCompatibleProviderOptions,
} from '../../../../src/llm/openai-compatible/openai-compatible.provider';

const FIXTURES = resolve(__dirname, '../../../fixtures/provider-streams/openai-chat');

/** What a stream carried, put together the way a consumer would. */
interface Collected {
  chunks: ChatStreamChunk[];
  text: string;
  reasoning: string;
  toolCalls: ToolCall[] | undefined;
  usages: ProviderUsage[];
}

async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<Collected> {
  const out: Collected = { chunks: [], text: '', reasoning: '', toolCalls: undefined, usages: [] };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    out.text += chunk.contentDelta ?? '';
    out.reasoning += chunk.reasoningDelta ?? '';
    if (chunk.toolCalls?.length) out.toolCalls = chunk.toolCalls;
    if (chunk.usage) out.usages.push(chunk.usage);
  }
  return out;
}

/** A long text known by its length, its ends and its SHA-256 (computed from the file by hand). */
interface LongText {
  length: number;
  start: string;
  end: string;
  sha256: string;
}

function expectText(actual: string, expected: string | LongText): void {
  if (typeof expected === 'string') return expect(actual).toBe(expected);
  expect(actual.length).toBe(expected.length);
  expect(actual.startsWith(expected.start)).toBe(true);
  expect(actual.endsWith(expected.end)).toBe(true);
  expect(createHash('sha256').update(actual).digest('hex')).toBe(expected.sha256);
}

interface FixtureExpectation {
  text: string | LongText;
  reasoning: string | LongText;
  toolCalls?: Array<{ id: string; name: string; arguments: string }>;
  usage: Required<ProviderUsage>;
}

const usage = (promptTokens: number, completionTokens: number, totalTokens: number) => ({
  promptTokens,
  completionTokens,
  totalTokens,
});

/** Expected content of every recorded stream, read off the files. */
const FIXTURE_EXPECTATIONS: Record<string, FixtureExpectation> = {
  'azure-model-router.1': { text: 'Capital of Denmark.', reasoning: '', usage: usage(15, 78, 93) },
  'deepseek-reasoning': {
    text: 'The word "strawberry" contains three "r"s.',
    reasoning: {
      length: 606,
      start: 'We need to count the number of the lette',
      end: 'nd 9. So yes, 3.\n\nThus, the answer is 3.',
      sha256: '01a5d04ca7e849fd2fade232d01ab33b2f93c8b2cd8c4bfaa2acc0f6d86f83f5',
    },
    usage: usage(18, 219, 237),
  },
  'deepseek-text': {
    text: {
      length: 1855,
      start: '## **Holiday Name:** Starlight Remembran',
      end: ' observe 15 minutes of silent looking at',
      sha256: '2293daa9001bc91d0d84ea889a31d2bc7194afed494341ec23d189a1e6b550b5',
    },
    reasoning: '',
    usage: usage(13, 400, 413),
  },
  'deepseek-tool-call': {
    text: '',
    reasoning: {
      length: 191,
      start: 'The user is asking for the weather in Sa',
      end: 'cation parameter set to "San Francisco".',
      sha256: 'e9e5190a993cf8919dac982cbe90e7202e9638702f6e4fbea9f1ff8614309fb8',
    },
    toolCalls: [
      {
        id: 'call_00_ioIn7yN9p1ZOMNpDLwd4MgAF',
        name: 'weather',
        arguments: '{"location": "San Francisco"}',
      },
    ],
    usage: usage(339, 83, 422),
  },
  'groq-reasoning': {
    text: {
      length: 347,
      start: 'The word **"strawberry"** is spelled as ',
      end: 'awberry".\n\n**Final Answer**: $\\boxed{3}$',
      sha256: 'c19609678caf916a806eac1d97cf4bf8fd56aeaa5aba0a252aab48fe7e2ae8b4',
    },
    reasoning: {
      length: 2952,
      start: 'Okay, let me try to figure out how many ',
      end: 'number of R\'s in "strawberry" is three.\n',
      sha256: 'a8661d5bd141de42fe1683760783adf1557a8c14802bb4c7cfffcfb3d78f0943',
    },
    usage: usage(17, 1107, 1124),
  },
  'groq-text': {
    text: {
      length: 3189,
      start: 'Introducing "Luminaria" - a new holiday ',
      end: 'per appreciation for the magic of light.',
      sha256: 'ca1f8ad858e90cfae58a43d5a1aa6cf08d2f572b50f498e121da8415e36f9063',
    },
    reasoning: '',
    usage: usage(45, 662, 707),
  },
  'groq-tool-call': {
    text: '',
    reasoning: '',
    toolCalls: [{ id: 'tk85n1k4m', name: 'weather', arguments: '{}' }],
    usage: usage(210, 15, 225),
  },
  'mistral-incremental-tool-call': {
    text: '',
    reasoning: '',
    toolCalls: [
      {
        id: 'chatcmpl-tool-9f149c74c42f265b',
        name: 'webSearchTool',
        arguments: '{"query": "current Berlin weather"}',
      },
    ],
    usage: usage(171, 14, 185),
  },
  'mistral-reasoning': {
    text: '2 + 2 = 4',
    reasoning: 'The user is asking for 2+2. This is basic arithmetic. 2+2=4.',
    usage: usage(10, 46, 56),
  },
  'mistral-text': {
    text: 'Hello, world! This is a test response.',
    reasoning: '',
    usage: usage(13, 8, 21),
  },
  'mistral-tool-call': {
    text: '',
    reasoning: '',
    toolCalls: [{ id: 'gSIMJiOkT', name: 'weather', arguments: '{"location": "San Francisco"}' }],
    usage: usage(124, 22, 146),
  },
  'openai-text': {
    text: {
      length: 1724,
      start: '**Holiday Name:** Harmony Day\n\n**Date:**',
      end: 'ed human experiences and mutual respect.',
      sha256: '53b2d9e583d02b3ff0a0e83be5beb61ce1d16ccddc7ab9f033e72ec8ef55c8e4',
    },
    reasoning: '',
    usage: usage(16, 300, 316),
  },
  'xai-text': {
    text: 'Grok',
    reasoning: {
      length: 1455,
      start: 'First, the user said: "Say a single word',
      end: 'possible, just the word.\n\nResponse: Grok',
      sha256: '822137627c2158b3af0788eabe6cb86165785a51d858d70418c4d3c06201221d',
    },
    usage: usage(12, 2, 354),
  },
  'xai-tool-call': {
    text: '',
    reasoning: {
      length: 1069,
      start: 'First, the user is asking about the weat',
      end: ' for now, this is the logical next step.',
      sha256: '7df9a5068fc57ed4c3b8a1639dc6b569a75dfcf8859c7fd2320f84e9a4d6bc6f',
    },
    toolCalls: [
      { id: 'call_79382389', name: 'weather', arguments: '{"location":"San Francisco"}' },
    ],
    usage: usage(307, 26, 560),
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

describe('OpenAiCompatibleProvider', () => {
  let server: FakeOpenAiServer;

  beforeEach(async () => {
    server = await FakeOpenAiServer.start();
  });

  afterEach(async () => {
    await server.close();
  });

  function provider(options: Partial<OpenAiCompatibleProviderOptions> = {}) {
    return new OpenAiCompatibleProvider({ baseURL: server.url, maxRetries: 0, ...options });
  }

  function request(extra: Partial<ChatRequest> = {}): ChatRequest {
    return {
      model: 'test-model',
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

      expectText(got.text, expected.text);
      expectText(got.reasoning, expected.reasoning);
      expect(got.usages).toEqual([expected.usage]);
      const calls = got.toolCalls?.map((c) => ({ id: c.id, ...c.function }));
      expect(calls).toEqual(expected.toolCalls);
      for (const call of got.toolCalls ?? []) expect(call.type).toBe('function');
      for (const call of calls ?? []) expect(() => JSON.parse(call.arguments)).not.toThrow();
      // Tool calls come once, at the end; no empty deltas are yielded.
      expect(got.chunks.filter((c) => c.toolCalls).length).toBe(expected.toolCalls ? 1 : 0);
      if (expected.toolCalls) expect(got.chunks.at(-1)?.toolCalls).toBeDefined();
      for (const chunk of got.chunks) {
        expect(chunk.contentDelta).not.toBe('');
        expect(chunk.reasoningDelta).not.toBe('');
      }
    });
  });

  describe('stream', () => {
    it('sends a streaming request that asks for usage', async () => {
      await collect(provider().stream(request()));

      expect(server.requests[0]).toMatchObject({
        model: 'test-model',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hi' }],
      });
    });

    it('joins text split into many chunks, in order', async () => {
      const text = 'The quick brown fox jumps over the lazy dog, naïvely — 🦊!';
      server.enqueue({ text, chunks: 25, usage: { prompt_tokens: 7, completion_tokens: 11 } });

      const got = await collect(provider().stream(request()));

      expect(got.chunks.filter((c) => c.contentDelta).length).toBe(25);
      expect(got.text).toBe(text);
      expect(got.usages).toEqual([usage(7, 11, 18)]);
      expect(got.toolCalls).toBeUndefined();
    });

    it('yields reasoning before text', async () => {
      server.enqueue({ text: 'Four.', reasoning: 'Two plus two is four.' });

      const got = await collect(provider().stream(request()));

      expect(got.chunks[0]).toEqual({ reasoningDelta: 'Two plus two is four.' });
      expect(got.text).toBe('Four.');
    });

    it('yields no usage chunk when the server reports no usage', async () => {
      server.enqueue({ text: 'no usage here', chunks: 3, usage: null });

      const got = await collect(provider().stream(request()));

      expect(got.text).toBe('no usage here');
      expect(got.usages).toEqual([]);
      expect(got.chunks.some((c) => 'usage' in c)).toBe(false);
    });

    it('assembles several tool calls from the fake server with complete JSON arguments', async () => {
      const args = { city: 'Zürich', days: [1, 2], nested: { quote: 'say "hi"\n' } };
      server.enqueue({
        text: 'Let me check.',
        toolCalls: [
          { name: 'weather', arguments: args, id: 'call_a' },
          { name: 'clock', arguments: {} },
        ],
      });

      const got = await collect(provider().stream(request()));

      expect(got.text).toBe('Let me check.');
      expect(got.toolCalls).toHaveLength(2);
      expect(got.toolCalls?.[0]).toEqual({
        id: 'call_a',
        type: 'function',
        function: { name: 'weather', arguments: JSON.stringify(args) },
      });
      expect(got.toolCalls?.[1].function).toEqual({ name: 'clock', arguments: '{}' });
      expect(got.toolCalls?.[1].id).toBe('call_fake_2');
    });

    it('assembles interleaved tool calls whose arguments split at awkward places', async () => {
      const chunk = (toolCalls: unknown[]) =>
        JSON.stringify({
          id: 'x',
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: { tool_calls: toolCalls } }],
        });
      server.enqueue({
        raw: [
          chunk([
            {
              index: 1,
              id: 'call_second',
              type: 'function',
              function: { name: 'search', arguments: '{"q' },
            },
          ]),
          chunk([
            {
              index: 0,
              id: 'call_first',
              type: 'function',
              function: { name: 'lookup', arguments: '' },
            },
          ]),
          chunk([{ index: 0, function: { arguments: '{"text": "a \\' } }]),
          chunk([{ index: 1, id: '', function: { name: '', arguments: '": "caf\\u00' } }]),
          chunk([{ index: 0, function: { arguments: '"quoted\\" ✓' } }]),
          chunk([
            { index: 1, function: { arguments: 'e9"}' } },
            { index: 0, function: { arguments: '", "n": 1' } },
          ]),
          chunk([{ index: 0, type: 'function', function: { arguments: '2}' } }]),
          chunk([{ index: 2, function: { name: 'no_id', arguments: '{}' } }]),
        ],
      });

      const got = await collect(provider().stream(request()));

      const calls = got.toolCalls ?? [];
      expect(calls.map((c) => [c.id, c.function.name])).toEqual([
        ['call_first', 'lookup'],
        ['call_second', 'search'],
        [expect.stringMatching(/^call_[A-Za-z0-9]+$/), 'no_id'],
      ]);
      expect(JSON.parse(calls[0].function.arguments)).toEqual({ text: 'a "quoted" ✓', n: 12 });
      expect(JSON.parse(calls[1].function.arguments)).toEqual({ q: 'café' });
      expect(calls[2].function.arguments).toBe('{}');
    });

    it('throws a ProviderError caused by the SDK error of an HTTP error answer', async () => {
      server.enqueue({ status: 400, body: { error: { message: 'bad tools', type: 'invalid' } } });

      const error = await collect(provider().stream(request())).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(ProviderError);
      expect(error).toMatchObject({ kind: 'bad-request', status: 400 });
      expect((error as ProviderError).cause).toBeInstanceOf(APIError);
      expect((error as Error).message).toContain('bad tools');
    });

    it('finishes a held answer once the server releases it', async () => {
      server.enqueue({ hold: true, text: 'first second', chunks: 2 });
      const iterator = provider().stream(request())[Symbol.asyncIterator]();

      expect((await iterator.next()).value).toEqual({ contentDelta: 'first ' });
      await server.nextRequest();
      expect(server.heldCount).toBe(1);
      server.release();

      expect((await iterator.next()).value).toEqual({ contentDelta: 'second' });
      expect((await iterator.next()).value).toEqual({ usage: usage(10, 5, 15) });
      expect((await iterator.next()).value).toEqual({
        responseModel: 'test-model',
        finishReason: 'stop',
      });
      expect((await iterator.next()).done).toBe(true);
    });

    it('throws APIUserAbortError when aborted mid-stream, and closes the connection', async () => {
      server.enqueue({ hold: true, text: 'never finished', chunks: 2 });
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

      const error = await collect(provider().stream(request({ signal: controller.signal }))).catch(
        (e: unknown) => e,
      );

      expect(error).toBeInstanceOf(APIUserAbortError);
      expect(server.requests).toEqual([]);
    });
  });

  describe('chat', () => {
    it('returns content, reasoning and usage of a non-streaming answer', async () => {
      server.enqueue({
        text: 'Paris.',
        reasoning: 'Capital of France.',
        usage: { prompt_tokens: 3, completion_tokens: 2 },
      });

      const response = await provider().chat(request());

      expect(response).toEqual({
        content: 'Paris.',
        reasoningContent: 'Capital of France.',
        toolCalls: undefined,
        usage: usage(3, 2, 5),
        responseModel: 'test-model',
        finishReason: 'stop',
      });
      expect(server.requests[0].stream).toBe(false);
      expect(server.requests[0].stream_options).toBeUndefined();
    });

    it('returns tool calls of a non-streaming answer', async () => {
      server.enqueue({
        toolCalls: [{ name: 'weather', arguments: { city: 'Oslo' }, id: 'call_1' }],
      });

      const response = await provider().chat(request());

      expect(response.content).toBe('');
      expect(response.toolCalls).toEqual([
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'weather', arguments: '{"city":"Oslo"}' },
        },
      ]);
    });

    it('answers "ok" when nothing is queued, with no reasoning', async () => {
      const response = await provider().chat(request());

      expect(response.content).toBe('ok');
      expect(response.reasoningContent).toBeUndefined();
    });

    it('throws APIUserAbortError when aborted before the answer starts', async () => {
      server.enqueue({ hold: true, text: 'late' });
      const controller = new AbortController();
      const pending = provider().chat(request({ signal: controller.signal }));
      await server.nextRequest();
      const disconnected = server.waitForDisconnect();

      controller.abort();

      await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
      await disconnected;
    });

    it('throws a ProviderError for an HTTP error answer', async () => {
      server.enqueue({ status: 401 });

      await expect(provider().chat(request())).rejects.toMatchObject({ kind: 'auth', status: 401 });
    });
  });

  describe('request mapping', () => {
    it('sends images as content parts only when a user message has some', async () => {
      const messages: ModelMessage[] = [
        user('look', { images: ['https://example.com/a.png', 'data:image/png;base64,AAAA'] }),
        user('plain'),
        user('empty list', { images: [] }),
      ];

      await provider().chat(request({ messages }));

      expect(server.requests[0].messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          ],
        },
        { role: 'user', content: 'plain' },
        { role: 'user', content: 'empty list' },
      ]);
    });

    it('maps roles, tool calls and tool results, and never sends metadata or reasoning', async () => {
      const call: ToolCall = {
        id: 'call_9',
        type: 'function',
        function: { name: 'f', arguments: '{"a":1}' },
      };
      const messages: ModelMessage[] = [
        { role: 'system', content: 'Be brief.', metadata: { bucket: 'system' } },
        user('hi', { metadata: { id: 'm1' } }),
        {
          role: 'assistant',
          content: '',
          toolCalls: [call],
          reasoningContent: 'thinking',
          metadata: { x: 1 },
        },
        { role: 'tool', content: '{"ok":true}', toolCallId: 'call_9', metadata: { y: 2 } },
        { role: 'assistant', content: 'Done.', reasoningContent: 'more thinking' },
      ];

      await provider().chat(request({ messages }));

      expect(server.requests[0].messages).toEqual([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_9', content: '{"ok":true}' },
        { role: 'assistant', content: 'Done.' },
      ]);
    });

    it('sends tools as functions and max_tokens, and omits an empty tool list', async () => {
      const parameters = { type: 'object', properties: { q: { type: 'string' } } };
      const tools = [{ name: 'search', description: 'Searches.', parameters }];

      await provider().chat(request({ tools, maxTokens: 256 }));
      await provider().chat(request({ tools: [] }));

      expect(server.requests[0].tools).toEqual([
        { type: 'function', function: { name: 'search', description: 'Searches.', parameters } },
      ]);
      expect(server.requests[0].max_tokens).toBe(256);
      expect(server.requests[1]).not.toHaveProperty('tools');
      expect(server.requests[1]).not.toHaveProperty('max_tokens');
    });

    it('maps think to reasoning_effort "high" only for models with reasoning', async () => {
      const p = provider({ capabilities: { 'deep-model': { reasoning: true } } });

      await p.chat(request({ model: 'deep-model', think: true }));
      await p.chat(request({ model: 'plain-model', think: true }));
      await p.chat(request({ model: 'deep-model', think: false }));
      await collect(p.stream(request({ model: 'deep-model', think: true })));

      expect(server.requests.map((body) => body.reasoning_effort)).toEqual([
        'high',
        undefined,
        undefined,
        'high',
      ]);
    });

    it('sends the API key, or "not-needed" when none is given', async () => {
      await provider().chat(request());
      await provider({ apiKey: 'sk-test' }).chat(request());

      expect(server.received[0].headers.authorization).toBe('Bearer not-needed');
      expect(server.received[1].headers.authorization).toBe('Bearer sk-test');
    });
  });

  describe('capabilities', () => {
    it('serves any model name with the default capabilities', () => {
      expect(provider().capabilities('some-local-llama')).toEqual({
        contextWindow: 128000,
        maxOutputTokens: 4096,
        vision: false,
        tools: true,
        encoding: 'cl100k_base',
      });
    });

    it.each([
      'gpt-4o',
      'gpt-4o-mini',
      'gpt-4.1-nano',
      'gpt-5',
      'o1-mini',
      'o3',
      'o4-mini',
      'openai/gpt-4o',
    ])('uses o200k_base for %s', (model) => {
      expect(provider().capabilities(model).encoding).toBe('o200k_base');
    });

    it.each(['gpt-4', 'gpt-3.5-turbo', 'llama-3.3-70b', 'qwen/qwen3-32b', 'o100'])(
      'uses cl100k_base for %s',
      (model) => {
        expect(provider().capabilities(model).encoding).toBe('cl100k_base');
      },
    );

    it('merges default and per-model overrides', () => {
      const p = provider({
        defaultCapabilities: { contextWindow: 32000, vision: true },
        capabilities: { big: { contextWindow: 1_000_000, reasoning: true } },
      });

      expect(p.capabilities('big')).toMatchObject({
        contextWindow: 1_000_000,
        vision: true,
        reasoning: true,
      });
      expect(p.capabilities('other')).toMatchObject({
        contextWindow: 32000,
        vision: true,
        tools: true,
      });
      expect(p.capabilities('other').reasoning).toBeUndefined();
    });

    it('takes id and default model from the options', () => {
      expect(provider().id).toBe('openai');
      const p = provider({ id: 'local', defaultModel: 'llama' });
      expect([p.id, p.defaultModel]).toEqual(['local', 'llama']);
    });
  });

  describe('ping', () => {
    it('lists the models', async () => {
      await provider().ping();

      expect(server.received.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models']);
    });

    it('throws when the endpoint cannot be reached', async () => {
      const gone = await FakeOpenAiServer.start();
      const url = gone.url;
      await gone.close();

      await expect(provider({ baseURL: url }).ping()).rejects.toThrow();
    });
  });
});
