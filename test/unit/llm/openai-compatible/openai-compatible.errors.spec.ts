import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { APIUserAbortError } from 'openai';
import { FakeOpenAiServer } from '../../../../src/testing';
import type { ChatRequest, ChatStreamChunk, ToolCall } from '../../../../src/contracts';
import { ProviderError } from '../../../../src/llm/provider-error';
import {
  OpenAiCompatibleProvider,
  type OpenAiCompatibleProviderOptions,
} from '../../../../src/llm/openai-compatible/openai-compatible.provider';

interface Collected {
  text: string;
  toolCalls?: ToolCall[];
  chunks: ChatStreamChunk[];
  error?: unknown;
}

/** Reads a stream to its end or its error, keeping what came before the error. */
async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<Collected> {
  const out: Collected = { text: '', chunks: [] };
  try {
    for await (const chunk of stream) {
      out.chunks.push(chunk);
      out.text += chunk.contentDelta ?? '';
      if (chunk.toolCalls) out.toolCalls = chunk.toolCalls;
    }
  } catch (error) {
    out.error = error;
  }
  return out;
}

/** A chat-completions chunk carrying `content` (and a finish reason when given). */
const chunk = (content: string, finish: string | null = null) =>
  JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta: { content }, finish_reason: finish }],
  });

/**
 * A bare local HTTP server whose handler writes whatever it likes, for the wire failures the
 * scripted fake server does not produce (sockets cut before or after headers, streams that end
 * without `[DONE]`).
 */
class RawServer {
  requests = 0;
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: ReturnType<typeof createServer>) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(
    handler: (res: ServerResponse, attempt: number, req: IncomingMessage) => void,
  ): Promise<RawServer> {
    let raw: RawServer | undefined = undefined;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => handler(res, ++raw!.requests, req));
    });
    raw = new RawServer(server);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return raw;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async close(): Promise<void> {
    await new Promise<void>((done) => {
      this.server.close(() => done());
      for (const socket of this.sockets) socket.destroy();
    });
  }
}

/** Writes SSE `data:` lines, waiting until each is flushed. */
async function writeLines(res: ServerResponse, lines: string[]): Promise<void> {
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const line of lines) {
    await new Promise<void>((done) => res.write(`data: ${line}\n\n`, () => done()));
  }
}

describe('OpenAiCompatibleProvider resilience and failures', () => {
  let server: FakeOpenAiServer;
  let raw: RawServer | undefined;

  beforeEach(async () => {
    server = await FakeOpenAiServer.start();
  });

  afterEach(async () => {
    await server.close();
    await raw?.close();
    raw = undefined;
  });

  function provider(options: Partial<OpenAiCompatibleProviderOptions> = {}) {
    return new OpenAiCompatibleProvider({ baseURL: server.url, maxRetries: 0, ...options });
  }

  function request(extra: Partial<ChatRequest> = {}): ChatRequest {
    return {
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      signal: new AbortController().signal,
      ...extra,
    };
  }

  async function fails(p: OpenAiCompatibleProvider, extra: Partial<ChatRequest> = {}) {
    const got = await collect(p.stream(request(extra)));
    expect(got.error).toBeInstanceOf(ProviderError);
    const error = got.error as ProviderError;
    expect(error.message).not.toMatch(/\n|\s+at \S+ \(.*:\d+:\d+\)|\.$/);
    return { error, got };
  }

  describe('retries before the first token', () => {
    it('retries a 429 honouring Retry-After: 0, then streams the answer', async () => {
      server.enqueue(
        { status: 429, headers: { 'retry-after': '0' } },
        { text: 'after the retry', chunks: 3 },
      );
      const delays: number[] = [];

      const got = await collect(
        provider({ maxRetries: 2, onRetry: (info) => delays.push(info.delayMs) }).stream(request()),
      );

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('after the retry');
      expect(server.requests).toHaveLength(2);
      expect(delays).toEqual([0]);
    });

    it('honours Retry-After in seconds and as an HTTP date (injected sleep, no real wait)', async () => {
      server.enqueue(
        { status: 429, headers: { 'retry-after': '2' } },
        { status: 503, headers: { 'retry-after': new Date(Date.now() + 5000).toUTCString() } },
        { text: 'third time' },
      );
      const waits: number[] = [];

      const got = await collect(
        provider({
          maxRetries: 3,
          sleep: async (ms) => {
            waits.push(ms);
          },
        }).stream(request()),
      );

      expect(got.text).toBe('third time');
      expect(waits[0]).toBe(2000);
      expect(waits[1]).toBeGreaterThan(3000);
      expect(waits[1]).toBeLessThanOrEqual(5000);
    });

    it('backs off exponentially with full jitter when there is no Retry-After', async () => {
      server.enqueue({ status: 500 }, { status: 502 }, { status: 503 }, { text: 'up' });
      const waits: number[] = [];

      const got = await collect(
        provider({
          maxRetries: 3,
          baseDelayMs: 100,
          random: () => 0.5,
          sleep: async (ms) => {
            waits.push(ms);
          },
        }).stream(request()),
      );

      expect(got.text).toBe('up');
      expect(waits).toEqual([50, 100, 200]);
    });

    it('gives up after maxRetries with a rate-limit error telling what to do', async () => {
      server.enqueue(...Array.from({ length: 3 }, () => ({ status: 429 })));

      const { error } = await fails(provider({ maxRetries: 2, sleep: async () => {} }));

      expect(error).toMatchObject({ kind: 'rate-limit', status: 429 });
      expect(error.message).toContain('wait a minute and try again');
      expect(server.requests).toHaveLength(3);
    });

    it('does not retry an exhausted quota', async () => {
      server.enqueue({
        status: 429,
        body: {
          error: { message: 'You exceeded your current quota.', code: 'insufficient_quota' },
        },
      });

      const { error } = await fails(provider({ maxRetries: 2, sleep: async () => {} }));

      expect(error).toMatchObject({ kind: 'rate-limit', retryable: false });
      expect(error.message).toContain('check the account');
      expect(server.requests).toHaveLength(1);
    });

    it('retries a connection closed before the answer started', async () => {
      raw = await RawServer.start((res, attempt) => {
        if (attempt === 1) return res.socket?.destroy();
        void writeLines(res, [chunk('fine', 'stop'), '[DONE]']).then(() => res.end());
      });

      const got = await collect(
        provider({ baseURL: raw.url, maxRetries: 1, baseDelayMs: 1 }).stream(request()),
      );

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('fine');
      expect(raw.requests).toBe(2);
    });

    it('retries a stream cut before its first chunk', async () => {
      raw = await RawServer.start((res, attempt) => {
        if (attempt === 1) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.flushHeaders();
          setTimeout(() => res.socket?.destroy(), 5);
          return;
        }
        void writeLines(res, [chunk('second', 'stop'), '[DONE]']).then(() => res.end());
      });

      const got = await collect(
        provider({ baseURL: raw.url, maxRetries: 1, baseDelayMs: 1 }).stream(request()),
      );

      expect(got.text).toBe('second');
      expect(raw.requests).toBe(2);
    });

    it('retries non-streaming calls too', async () => {
      server.enqueue({ status: 503 }, { text: 'whole' });

      const response = await provider({ maxRetries: 1, baseDelayMs: 1 }).chat(request());

      expect(response.content).toBe('whole');
      expect(server.requests).toHaveLength(2);
    });

    it('stops waiting for a retry when aborted, with an abort error', async () => {
      server.enqueue({ status: 429, headers: { 'retry-after': '60' } });
      const controller = new AbortController();

      const got = await collect(
        provider({ maxRetries: 2, onRetry: () => controller.abort() }).stream(
          request({ signal: controller.signal }),
        ),
      );

      expect(got.error).toBeInstanceOf(APIUserAbortError);
      expect(server.requests).toHaveLength(1);
    });

    it('drops stream_options for an endpoint that rejects it, and remembers', async () => {
      server.enqueue(
        {
          status: 400,
          body: { error: { message: 'Unrecognized request argument supplied: stream_options' } },
        },
        { text: 'no usage asked' },
        { text: 'again' },
      );
      const p = provider();

      expect((await collect(p.stream(request()))).text).toBe('no usage asked');
      expect((await collect(p.stream(request()))).text).toBe('again');

      expect(server.requests.map((body) => 'stream_options' in body)).toEqual([true, false, false]);
    });
  });

  describe('no retry once tokens were streamed', () => {
    it('ends with a server error when the stream reports an error after tokens', async () => {
      server.enqueue({
        raw: [
          chunk('Par'),
          JSON.stringify({ error: { message: 'Internal error', type: 'server_error', code: 500 } }),
        ],
      });

      const { error, got } = await fails(provider({ maxRetries: 3, baseDelayMs: 1 }));

      expect(got.text).toBe('Par');
      expect(error.kind).toBe('server');
      expect(error.message).toContain('server_error: Internal error');
      expect(server.requests).toHaveLength(1);
    });

    it('ends with "disconnected" when the server cuts the connection mid-stream', async () => {
      raw = await RawServer.start((res) => {
        void writeLines(res, [chunk('Hel'), chunk('lo')]).then(() => res.socket?.destroy());
      });

      const { error, got } = await fails(
        provider({ baseURL: raw.url, maxRetries: 3, baseDelayMs: 1 }),
      );

      expect(got.text).toBe('Hello');
      expect(error.kind).toBe('disconnected');
      expect(error.message).toBe(
        `The model endpoint ${raw.url} closed the connection before the answer was complete: try again, and check the server's logs if it keeps happening`,
      );
      expect(raw.requests).toBe(1);
    });

    it('ends with "disconnected" when the held fake server goes away mid-stream', async () => {
      server.enqueue({ hold: true, text: 'never finished', chunks: 2 });
      const iterator = provider({ maxRetries: 2 }).stream(request())[Symbol.asyncIterator]();
      expect((await iterator.next()).value).toEqual({ contentDelta: 'never f' });

      await server.close();

      await expect(iterator.next()).rejects.toMatchObject({ kind: 'disconnected' });
      expect(server.requests).toHaveLength(1);
    });

    it('ends with "disconnected" when the stream ends cleanly without [DONE] or a finish', async () => {
      raw = await RawServer.start((res) => {
        void writeLines(res, [chunk('half')]).then(() => res.end());
      });

      const { error, got } = await fails(provider({ baseURL: raw.url }));

      expect(got.text).toBe('half');
      expect(error.kind).toBe('disconnected');
    });

    it('accepts a finished answer whose stream lacks [DONE]', async () => {
      raw = await RawServer.start((res) => {
        void writeLines(res, [chunk('whole', 'stop')]).then(() => res.end());
      });

      const got = await collect(provider({ baseURL: raw.url }).stream(request()));

      expect(got.error).toBeUndefined();
      expect(got.text).toBe('whole');
    });

    it('reports a chunk that is not JSON as a malformed stream', async () => {
      server.enqueue({ raw: [chunk('Hi'), '{"choices": [{"index": 0, "delta": {'] });

      const { error, got } = await fails(provider({ maxRetries: 2 }));

      expect(got.text).toBe('Hi');
      expect(error.kind).toBe('malformed-stream');
      expect(error.message).toContain('OpenAI-compatible server');
      expect(server.requests).toHaveLength(1);
    });

    it('gives up on a stream that goes silent for longer than idleTimeoutMs', async () => {
      server.enqueue({ hold: true, text: 'and then nothing', chunks: 2 });

      // 0.5 s, not less: a CI stall between the headers and the first chunk must not read as a
      // silence before the answer.
      const { error, got } = await fails(provider({ idleTimeoutMs: 500 }));

      expect(got.text).toBe('and then');
      expect(error.kind).toBe('disconnected');
      expect(error.message).toContain('went silent for 0.5 s in the middle of an answer');
    });
  });

  describe('one actionable sentence per failure', () => {
    it('unreachable endpoint', async () => {
      raw = await RawServer.start(() => undefined);
      const url = raw.url;
      await raw.close();
      raw = undefined;

      const { error } = await fails(provider({ baseURL: url }));

      expect(error.kind).toBe('unreachable');
      expect(error.message).toBe(
        `The model endpoint ${url} cannot be reached: check LLM_BASE_URL and that the server is running`,
      );
    });

    it('request timeout', async () => {
      server.enqueue({ status: 200, hold: true });

      const error = await provider({ timeoutMs: 50 })
        .chat(request())
        .catch((e: unknown) => e);

      expect(error).toMatchObject({ kind: 'unreachable' });
      expect((error as Error).message).toContain('did not answer within');
    });

    it('401: check the API key', async () => {
      server.enqueue({ status: 401, body: { error: { message: 'Incorrect API key provided' } } });

      const { error } = await fails(provider());

      expect(error).toMatchObject({ kind: 'auth', status: 401 });
      expect(error.message).toBe(
        `The model endpoint ${server.url} rejected the API key (401 Unauthorized): check LLM_API_KEY`,
      );
    });

    it('403: check what the key may use', async () => {
      server.enqueue({ status: 403 });

      const { error } = await fails(provider());

      expect(error.kind).toBe('auth');
      expect(error.message).toContain('check that LLM_API_KEY may use model "test-model"');
    });

    it('404: unknown model', async () => {
      server.enqueue({
        status: 404,
        body: {
          error: {
            message: 'The model `gpt-nope` does not exist or you do not have access to it.',
            code: 'model_not_found',
          },
        },
      });

      const { error } = await fails(provider(), { model: 'gpt-nope' });

      expect(error.kind).toBe('model-not-found');
      expect(error.message).toContain('does not know the model "gpt-nope"');
      expect(error.message).toContain('check LLM_MODEL');
    });

    it('400 with an unknown model named in the message (Ollama, vLLM style)', async () => {
      server.enqueue({
        status: 400,
        body: { error: { message: 'model "llama9" not found, try pulling it first' } },
      });

      const { error } = await fails(provider(), { model: 'llama9' });

      expect(error.kind).toBe('model-not-found');
    });

    it.each([
      { error: { message: 'too long', code: 'context_length_exceeded' } },
      {
        error: {
          message:
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        },
      },
    ])('400: context length exceeded (%#)', async (body) => {
      server.enqueue({ status: 400, body });

      const { error } = await fails(provider());

      expect(error.kind).toBe('context-length');
      expect(error.message).toBe(
        'The conversation is too long for the context window of model "test-model": start a new session, or lower the history limit or the model\'s contextWindow setting',
      );
    });

    it('400: other bad requests quote the server in one sentence', async () => {
      server.enqueue({
        status: 400,
        body: { error: { message: "Invalid 'tools[0].function.name'.\nUse letters only." } },
      });

      const { error } = await fails(provider());

      expect(error).toMatchObject({ kind: 'bad-request', retryable: false });
      expect(error.message).toContain("(400: Invalid 'tools[0].function.name'; Use letters only)");
    });

    it('keeps credentials and query out of the endpoint it names', async () => {
      server.enqueue({ status: 401 });
      const url = new URL(server.url);
      url.username = 'user';
      url.password = 'secret';
      url.search = '?key=abc';

      const { error } = await fails(provider({ baseURL: url.toString() }));

      expect(error.message).not.toMatch(/secret|abc|user/);
    });
  });
});
