import OpenAI, { APIConnectionError, APIUserAbortError, RateLimitError } from 'openai';
import { FakeOpenAiServer } from '../../../src/testing';

/**
 * The fake server as a host's tests use it: the real `openai` client talks to it over a socket,
 * so what it streams must parse as OpenAI's own answers do.
 */
describe('FakeOpenAiServer (nest-agent-orchestrator/testing)', () => {
  let server: FakeOpenAiServer;
  let client: OpenAI;

  beforeEach(async () => {
    server = await FakeOpenAiServer.start();
    client = new OpenAI({ baseURL: server.url, apiKey: 'test-key', maxRetries: 0 });
  });

  afterEach(() => server.close());

  const ask = { model: 'fake-model', messages: [{ role: 'user' as const, content: 'Hi' }] };

  it('serves on 127.0.0.1 under /v1 and lists its models', async () => {
    server.models = ['fake-model', 'other-model'];

    const models = await client.models.list();

    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(models.data.map((m) => m.id)).toEqual(['fake-model', 'other-model']);
    expect(server.received.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models']);
    expect(server.requests).toEqual([]);
  });

  it('streams a scripted text in the given number of deltas, reasoning first, usage last', async () => {
    server.enqueue({ text: 'Hello there!', chunks: 3, reasoning: 'Greet back.' });

    const stream = await client.chat.completions.create({
      ...ask,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);

    const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta));
    expect(deltas.map((d) => d.content).filter((c) => c)).toEqual(['Hell', 'o th', 'ere!']);
    expect((deltas[0] as { reasoning_content?: string }).reasoning_content).toBe('Greet back.');
    expect(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason))).toContain(
      'stop',
    );
    expect(chunks.at(-1)?.usage).toEqual({
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
    });
    expect(server.requests).toEqual([expect.objectContaining({ ...ask, stream: true })]);
    expect(server.pending).toBe(0);
  });

  it('streams a scripted tool call that the openai client assembles into a whole call', async () => {
    server.enqueue({
      text: 'Let me look.',
      toolCalls: [{ name: 'order_status', arguments: { orderId: '42' }, id: 'call_1' }],
      usage: { prompt_tokens: 7, completion_tokens: 3 },
    });

    const stream = client.chat.completions.stream({
      ...ask,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'order_status', parameters: {} } }],
    });
    const completion = await stream.finalChatCompletion();

    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    expect(completion.choices[0].message.content).toBe('Let me look.');
    expect(completion.choices[0].message.tool_calls).toEqual([
      expect.objectContaining({
        id: 'call_1',
        type: 'function',
        function: expect.objectContaining({
          name: 'order_status',
          arguments: '{"orderId":"42"}',
        }),
      }),
    ]);
    expect(completion.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3 });
    expect(server.requests[0].tools[0].function.name).toBe('order_status');
  });

  it('answers one JSON completion when the request does not stream; ids default to call_fake_<n>', async () => {
    server.enqueue({
      toolCalls: [
        { name: 'a', arguments: {} },
        { name: 'b', arguments: '{}' },
      ],
    });

    const completion = await client.chat.completions.create(ask);

    expect(completion.object).toBe('chat.completion');
    expect(completion.choices[0].message.tool_calls?.map((c) => c.id)).toEqual([
      'call_fake_1',
      'call_fake_2',
    ]);
  });

  it('takes the scripts in order and answers "ok" when none is queued', async () => {
    server.enqueue({ text: 'first' }, { text: 'second' });

    const texts: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      const completion = await client.chat.completions.create(ask);
      texts.push(completion.choices[0].message.content);
    }

    expect(texts).toEqual(['first', 'second', 'ok']);
    expect(server.requests).toHaveLength(3);
  });

  it('answers an error script with its status, and an OpenAI-style error body by default', async () => {
    server.enqueue({ status: 429 }, { status: 400, body: { error: { message: 'Bad model' } } });

    const limited = await client.chat.completions.create(ask).catch((error: unknown) => error);
    const bad = await client.chat.completions.create(ask).catch((error: unknown) => error);

    expect(limited).toBeInstanceOf(RateLimitError);
    expect(limited).toMatchObject({ status: 429, message: expect.stringContaining('Fake error') });
    expect(bad).toMatchObject({ status: 400, message: expect.stringContaining('Bad model') });
  });

  it('holds an answer after its first chunk until release()', async () => {
    server.enqueue({ text: 'one two', chunks: 2, hold: true });

    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const reader = stream[Symbol.asyncIterator]();
    const first = await reader.next();

    expect(first.value?.choices[0].delta.content).toBe('one');
    expect(server.heldCount).toBe(1);

    server.release();
    const rest: string[] = [];
    for (let next = await reader.next(); !next.done; next = await reader.next()) {
      rest.push(next.value.choices[0]?.delta.content ?? '');
    }

    expect(rest.join('')).toBe(' two');
    expect(server.heldCount).toBe(0);
  });

  it('a client that aborts a held answer shows as a disconnect, and the hold is dropped', async () => {
    server.enqueue({ status: 500, hold: true });
    const controller = new AbortController();

    const call = client.chat.completions.create(ask, { signal: controller.signal });
    await server.nextRequest();
    expect(server.heldCount).toBe(1);
    controller.abort();

    await expect(call).rejects.toBeInstanceOf(APIUserAbortError);
    await server.waitForDisconnect();
    expect(server.heldCount).toBe(0);
  });

  it('breaks the wire as a fault script says (a socket destroyed mid-stream)', async () => {
    server.enqueue({ fault: 'disconnect-mid-stream', text: 'Hello there' });

    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const seen: string[] = [];
    const error = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? '');
    })().catch((e: unknown) => e);

    expect(seen).toEqual(['Hello']);
    // fetch's own TypeError (of another realm under jest): the body broke off after the headers.
    expect(error).toMatchObject({ name: 'TypeError', message: 'terminated' });
    expect(error).not.toBeInstanceOf(APIConnectionError);
  });

  it('discardScripts() drops what is left; close() ends a held answer', async () => {
    server.enqueue({ text: 'held', hold: true }, { text: 'unused' }, { text: 'unused' });
    const call = client.chat.completions.create(ask);
    await server.nextRequest();

    expect(server.discardScripts()).toBe(2);
    expect(server.pending).toBe(0);

    await server.close();
    await expect(call).rejects.toBeInstanceOf(Error);
  });
});
