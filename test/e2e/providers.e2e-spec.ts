import { createServer } from 'node:net';
import {
  AnthropicProvider,
  DemoProvider,
  ModelNotFoundError,
  OpenAiCompatibleProvider,
  ToolRegistry,
  type LlmProvider,
  type Settlement,
} from '../../src';
import { clockTool, createProviderFromEnv, describeProvider } from '../../src/llm';
import { loadAppConfig } from '../../src/app.config';
import { AgentHarness } from '../support/agent-harness';
import { FakeAnthropicServer } from '../support/fake-anthropic-server';
import { FakeOpenAiServer, type FakeScript } from '../../src/testing';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** The notice of a failed turn: one sentence, one line, no stack trace. */
function expectOneSentenceNotice(notice: string | undefined): string {
  expect(notice).toMatch(/^\[error\] The turn failed: [^\n]+\.$/);
  expect(notice).not.toMatch(/\s+at\s|Error:|\n/);
  // One sentence: no full stop followed by another sentence.
  expect(notice!.slice(0, -1)).not.toMatch(/\.\s+[A-Z]/);
  return notice!;
}

describe('model providers end to end', () => {
  let h: AgentHarness | undefined;
  let server: FakeOpenAiServer | undefined;
  let anthropic: FakeAnthropicServer | undefined;

  afterEach(async () => {
    await h?.close();
    await server?.close();
    await anthropic?.close();
    h = undefined;
    server = undefined;
    anthropic = undefined;
  });

  /** A harness whose turns go through `provider`, given the fake OpenAI server's URL. */
  async function boot(provider: (openAiUrl: string) => LlmProvider): Promise<AgentHarness> {
    server = await FakeOpenAiServer.start();
    h = await AgentHarness.start({ server, agent: { llmProvider: provider(server.url) } });
    return h;
  }

  const openai = (url: string) =>
    new OpenAiCompatibleProvider({ baseURL: url, defaultModel: 'test-model', maxRetries: 0 });

  describe('each failure ends the turn with outcome error and an actionable [error] notice', () => {
    const openAiCases: Array<{ kind: string; scripts: FakeScript[]; says: string }> = [
      {
        kind: 'auth',
        scripts: [{ status: 401 }],
        says: 'rejected the API key (401 Unauthorized): check LLM_API_KEY',
      },
      {
        kind: 'model-not-found',
        scripts: [
          { status: 404, body: { error: { message: 'model not found', code: 'model_not_found' } } },
        ],
        says: 'does not know the model "test-model" (404): check LLM_MODEL',
      },
      {
        kind: 'context-length',
        scripts: [
          {
            status: 400,
            body: { error: { message: 'too long', code: 'context_length_exceeded' } },
          },
        ],
        says: 'too long for the context window of model "test-model": start a new session',
      },
      {
        kind: 'rate-limit',
        scripts: [{ status: 429 }],
        says: 'is rate-limiting requests (429): wait a minute',
      },
      {
        kind: 'server',
        scripts: [{ status: 500 }],
        says: 'failed (500: Fake error 500): try again in a moment',
      },
      {
        kind: 'bad-request',
        scripts: [{ status: 400, body: { error: { message: 'tools are not supported' } } }],
        says: 'rejected the request (400: tools are not supported)',
      },
      {
        kind: 'malformed-stream',
        scripts: [{ raw: ['{"choices":[{"index":0,"delta":{"content":"Hi"}}]}', '{oops'] }],
        says: 'sent a malformed stream (a chunk is not valid JSON): check that LLM_BASE_URL is the address of an OpenAI-compatible server',
      },
      {
        kind: 'server (error chunk after tokens)',
        scripts: [
          {
            raw: [
              '{"choices":[{"index":0,"delta":{"content":"Par"}}]}',
              '{"error":{"message":"upstream crashed","type":"server_error"}}',
            ],
          },
        ],
        says: 'reported an error mid-answer (server_error: upstream crashed)',
      },
    ];

    it.each(openAiCases)('OpenAI-compatible: $kind', async ({ scripts, says }) => {
      await boot(openai);
      h!.server.enqueue(...scripts);

      const settled = (await h!.agent.handleMessage({
        sessionId: 's',
        content: 'hi',
      })) as Settlement & {
        settled: 'turn';
      };

      expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
      const notice = expectOneSentenceNotice(settled.error);
      expect(notice).toContain(says);
      const systemMessages = h!.of('outbound:message').filter((m) => m.source === 'system');
      expect(systemMessages.map((m) => m.content)).toEqual([notice]);
      expect(h!.of('agent:turn:end').map((e) => e.outcome)).toEqual(['error']);
      expect(h!.of('outbound:stream').filter((e) => e.done)).toHaveLength(1);
      expect(h!.server.requests).toHaveLength(1);
    });

    it('OpenAI-compatible: unreachable endpoint', async () => {
      const port = await closedPort();
      await boot(() => openai(`http://127.0.0.1:${port}/v1`));

      const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'hi' });

      expect(settled).toMatchObject({ outcome: 'error' });
      const notice = expectOneSentenceNotice((settled as { error?: string }).error);
      expect(notice).toBe(
        `[error] The turn failed: The model endpoint http://127.0.0.1:${port}/v1 cannot be reached: check LLM_BASE_URL and that the server is running.`,
      );
    });

    it('OpenAI-compatible: disconnect mid-stream (no retry after tokens)', async () => {
      await boot(
        (url) => new OpenAiCompatibleProvider({ baseURL: url, defaultModel: 'm', maxRetries: 2 }),
      );
      h!.server.enqueue({ hold: true, text: 'never finished', chunks: 2 });

      const pending = h!.agent.handleMessage({ sessionId: 's', content: 'hi' });
      await h!.waitFor('outbound:stream', (e) => e.delta === 'never f');
      await h!.server.close();
      const settled = await pending;

      expect(settled).toMatchObject({ outcome: 'error' });
      expect(expectOneSentenceNotice((settled as { error?: string }).error)).toContain(
        'closed the connection before the answer was complete: try again',
      );
      expect(h!.server.requests).toHaveLength(1);
    });

    it('OpenAI-compatible: 429 then success is retried and the turn replies', async () => {
      await boot(
        (url) => new OpenAiCompatibleProvider({ baseURL: url, defaultModel: 'm', maxRetries: 2 }),
      );
      h!.server.enqueue(
        { status: 429, headers: { 'retry-after': '0' } },
        { text: 'made it', chunks: 2 },
      );

      const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'hi' });

      expect(settled).toMatchObject({ outcome: 'replied', reply: 'made it' });
      expect(h!.server.requests).toHaveLength(2);
    });

    it.each([
      {
        kind: 'disconnected',
        script: { text: 'cut off here', chunks: 3, destroyAfter: 5 },
        says: 'closed the connection before the answer was complete',
      },
      {
        kind: 'malformed-stream',
        script: {
          raw: [
            '{"type":"message_start","message":{"id":"a"}}',
            '{"type":"message_start","message":{"id":"b"}}',
          ],
        },
        says: 'a second message started before the first one ended',
      },
      { kind: 'auth', script: { status: 401 }, says: 'check LLM_API_KEY' },
      { kind: 'server (overloaded)', script: { status: 529 }, says: 'is overloaded (529' },
    ])('Anthropic: $kind', async ({ script, says }) => {
      anthropic = await FakeAnthropicServer.start();
      const url = anthropic.url;
      await boot(
        () => new AnthropicProvider({ baseURL: url, defaultModel: 'claude-fake-4', maxRetries: 0 }),
      );
      anthropic.enqueue(script);

      const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'hi' });

      expect(settled).toMatchObject({ outcome: 'error' });
      expect(expectOneSentenceNotice((settled as { error?: string }).error)).toContain(says);
    });
  });

  it('runs a full turn through the Anthropic adapter, tool call included', async () => {
    anthropic = await FakeAnthropicServer.start();
    const url = anthropic.url;
    await boot(
      () => new AnthropicProvider({ baseURL: url, defaultModel: 'claude-fake-4', maxRetries: 0 }),
    );
    const seen: unknown[] = [];
    h!.app.get(ToolRegistry).register({
      name: 'echo',
      description: 'Echoes its text',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      handler: (args: { text: string }) => {
        seen.push(args);
        return { echoed: args.text };
      },
    });
    anthropic.enqueue(
      {
        text: 'Checking.',
        jsonChunks: 5,
        toolCalls: [{ name: 'echo', arguments: { text: 'grüße "x"' }, id: 'toolu_e2e' }],
        usage: { input_tokens: 40, output_tokens: 6 },
      },
      { text: 'The echo said grüße.', chunks: 4, usage: { input_tokens: 60, output_tokens: 8 } },
    );

    const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'echo it' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'The echo said grüße.' });
    expect(seen).toEqual([{ text: 'grüße "x"' }]);
    const [first, second] = anthropic.requests;
    expect(first.system).toEqual(expect.any(String));
    expect(first.tools).toEqual([
      expect.objectContaining({ name: 'echo', input_schema: expect.any(Object) }),
    ]);
    expect(second.messages.slice(-2)).toEqual([
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool_use', id: 'toolu_e2e', name: 'echo', input: { text: 'grüße "x"' } },
        ],
      },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_e2e',
            content: JSON.stringify({ echoed: 'grüße "x"' }),
          },
        ],
      },
    ]);
    const stored = await h!.stored('s');
    expect(stored.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(h!.of('token:usage').length).toBe(2);
  });

  it('runs a full demo-model turn with the clock tool', async () => {
    await boot(() => new DemoProvider({ wordDelayMs: 1 }));
    h!.app.get(ToolRegistry).register(clockTool);

    const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'What time is it?' });

    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    const reply = (settled as { reply: string }).reply;
    expect(reply).toMatch(/^\[demo model\] The clock tool says it is .*\d{4}-\d{2}-\d{2}T/);
    const executions = h!.of('tool:execute').filter((e) => e.phase === 'end');
    expect(executions.map((e) => e.name)).toEqual(['clock']);
    expect(h!.of('outbound:stream').filter((e) => e.delta).length).toBeGreaterThan(5);
    const stored = await h!.stored('s');
    expect(stored.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    await expect(h!.agent.assignModel('s', { model: 'gpt-4o' })).rejects.toBeInstanceOf(
      ModelNotFoundError,
    );
  });

  it('runs a turn with npm start-style configuration (LLM_BASE_URL at the local server)', async () => {
    await boot((url) => {
      const config = loadAppConfig({
        LLM_BASE_URL: url,
        LLM_MODEL: 'local-model',
        LLM_API_KEY: 'sk-local',
      });
      const provider = createProviderFromEnv(config.llm ?? {});
      expect(describeProvider(provider)).toBe(
        `Model provider: OpenAI-compatible endpoint ${url} (id openai, model local-model)`,
      );
      return provider;
    });
    h!.server.enqueue({ text: 'configured from the environment', chunks: 3 });

    const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'hi' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'configured from the environment' });
    expect(h!.server.requests[0]).toMatchObject({ model: 'local-model', stream: true });
    expect(h!.server.received[0].headers.authorization).toBe('Bearer sk-local');
  });

  it('falls back to the labelled demo model when LLM_BASE_URL is unset', async () => {
    const config = loadAppConfig({});
    const provider = createProviderFromEnv(config.llm ?? {});
    expect(provider).toBeInstanceOf(DemoProvider);
    expect(describeProvider(provider)).toMatch(/OFFLINE DEMO model/);
    await boot(() => new DemoProvider({ wordDelayMs: 0 }));

    const settled = await h!.agent.handleMessage({ sessionId: 's', content: 'hello' });

    expect(settled).toMatchObject({ outcome: 'replied' });
    expect((settled as { reply: string }).reply).toMatch(/^\[demo model\] Hello!/);
  });
});
