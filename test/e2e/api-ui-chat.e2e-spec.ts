import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { ApiApp } from '../support/api-app';
import { drain, textOf, turnIdsOf } from '../support/turn-streams';

/** A user message of the AI SDK's shape. */
const user = (id: string, text: string): UIMessage => ({
  id,
  role: 'user',
  parts: [{ type: 'text', text }],
});

/** Reads chunks until one matches; the rest stays readable through the returned reader. */
async function readUntil(
  stream: ReadableStream<UIMessageChunk>,
  match: (chunk: UIMessageChunk) => boolean,
) {
  const seen: UIMessageChunk[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended before the chunk: ${JSON.stringify(seen)}`);
    seen.push(value);
    if (match(value)) return { seen, reader };
  }
}

/** The `id:` values and `data:` values of a raw SSE body. */
function sseOf(text: string) {
  const events = text.split('\n\n').filter(Boolean);
  return {
    ids: events.flatMap((e) => /^id: (.*)$/m.exec(e)?.[1] ?? []),
    data: events.map((e) => /^data: (.*)$/m.exec(e)?.[1] ?? ''),
  };
}

describe('AI SDK UI message stream (README: AI SDK UI message stream)', () => {
  let a: ApiApp;
  let transport: DefaultChatTransport<UIMessage>;
  beforeAll(async () => {
    a = await ApiApp.start();
    transport = new DefaultChatTransport({ api: `${a.url}/agent/ui/chat`, headers: a.auth });
  });
  afterAll(() => a?.close());

  /** `transport.sendMessages` of one user message. */
  const send = (chatId: string, text: string, extra: Record<string, unknown> = {}) =>
    transport.sendMessages({
      trigger: 'submit-message',
      chatId,
      messageId: undefined,
      messages: [user(`${chatId}-${text}`, text)],
      abortSignal: undefined,
      ...extra,
    });

  it('a turn with reasoning, a tool call and text, read by the real transport', async () => {
    a.server.enqueue(
      { toolCalls: [{ name: 'missing_tool', arguments: { q: 1 } }] },
      { text: 'Hello there', reasoning: 'Let me think', chunks: 2 },
    );
    const chunks = await drain(await send('ui-plain', 'hi'));
    const types = chunks.map((c) => c.type);
    expect(types[0]).toBe('start');
    expect(types.at(-1)).toBe('finish');
    expect(chunks.at(-1)).toMatchObject({ finishReason: 'stop' });
    expect(types.filter((t) => t === 'start-step')).toHaveLength(2);
    expect(types.filter((t) => t === 'finish-step')).toHaveLength(2);
    const input = chunks.find((c) => c.type === 'tool-input-available') as any;
    expect(input).toMatchObject({ toolName: 'missing_tool', input: { q: 1 } });
    const output = chunks.find(
      (c) => c.type === 'tool-output-error' || c.type === 'tool-output-available',
    ) as any;
    expect(output.toolCallId).toBe(input.toolCallId);
    expect(textOf(chunks)).toBe('Hello there');
    expect(types).toEqual(expect.arrayContaining(['reasoning-start', 'reasoning-end', 'text-end']));
    expect(types).toContain('data-usage');
    const [turnId] = turnIdsOf(chunks);
    expect((chunks[0] as any).messageId).toBe(turnId);

    // The AI SDK's own reader builds the assistant message from the same chunks.
    const replay = await transport.reconnectToStream({ chatId: 'ui-plain' });
    let message: UIMessage | undefined;
    for await (const m of readUIMessageStream({ stream: replay! })) message = m;
    const parts = message!.parts;
    expect(parts.find((p) => p.type === 'reasoning')).toMatchObject({ text: 'Let me think' });
    expect(parts.find((p) => p.type === 'text')).toMatchObject({ text: 'Hello there' });
    expect(parts.find((p) => p.type.startsWith('tool-') || p.type === 'dynamic-tool')).toBeTruthy();
  });

  it('raw SSE: the header, id lines <turnId>:<seq>, [DONE]; Last-Event-ID continues after it', async () => {
    a.server.enqueue({ text: 'abc', chunks: 3 });
    const res = await fetch(`${a.url}/agent/ui/chat`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        id: 'ui-raw',
        messages: [user('m1', 'hi')],
        trigger: 'submit-message',
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = await res.text();
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    const { ids } = sseOf(body);
    const turnId = ids[0].split(':')[0];
    expect(ids.map((id) => Number(id.split(':')[1]))).toEqual(ids.map((_, i) => i + 1));
    expect(ids.every((id) => id.startsWith(`${turnId}:`))).toBe(true);

    // The turn ended less than 60 s ago: a resume after its second event gets the rest.
    const rest = await fetch(`${a.url}/agent/ui/chat/ui-raw/stream`, {
      headers: { ...a.auth, 'Last-Event-ID': `${turnId}:2` },
    });
    expect(rest.status).toBe(200);
    const after = sseOf(await rest.text());
    expect(after.ids).toEqual(ids.slice(2));
    expect(after.data.at(-1)).toBe('[DONE]');
    // The same header on the POST (a retried request) continues too, without a new input.
    const retried = await fetch(`${a.url}/agent/ui/chat`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json', 'Last-Event-ID': ids.at(-2)! },
      body: JSON.stringify({ id: 'ui-raw', messages: [user('m1', 'hi')] }),
    });
    expect(sseOf(await retried.text()).ids).toEqual([ids.at(-1)]);
  });

  it('an input that arrives while a turn runs joins it and gets the rest of that turn', async () => {
    a.server.enqueue(
      { toolCalls: [{ name: 'missing_tool', arguments: {} }], hold: true },
      { text: 'both answered' },
    );
    const firstCall = a.nextModelCall();
    const first = await send('ui-join', 'one');
    await firstCall;
    // The second input is pending insertion (announced as waiting) before the turn goes on.
    const pending = a.nextEvent('agent:queue', (e) => e.sessionId === 'ui-join' && !!e.waiting[0]);
    const second = await send('ui-join', 'two');
    await pending;
    const secondCall = a.nextModelCall();
    a.server.release();
    const body = await secondCall;
    expect(JSON.stringify(body.messages)).toContain('two');
    const [a1, a2] = await Promise.all([drain(first), drain(second)]);
    expect(turnIdsOf(a2)).toEqual(turnIdsOf(a1));
    expect(textOf(a2)).toBe('both answered');
    expect(a2[0]).toMatchObject({ type: 'start', messageId: turnIdsOf(a1)[0] });
    expect(a2.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });

  it('an input that waits behind a sourced turn says where it waits, then gets its own turn', async () => {
    a.server.enqueue({ text: 'scheduled', hold: true }, { text: 'yours' });
    const firstCall = a.nextModelCall();
    const sourced = a.postAndWait({ sessionId: 'ui-wait', content: 'tick', source: 'scheduler' });
    await firstCall;
    const waiting = await send('ui-wait', 'me');
    a.server.release();
    const chunks = await drain(waiting);
    expect((await sourced).status).toBe(200);
    expect(chunks[0]).toMatchObject({ type: 'data-queue', data: { position: 0 } });
    expect(textOf(chunks)).toBe('yours');
    const [own] = turnIdsOf(chunks);
    expect(own).not.toBe((await sourced).body.turnId);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish' });
  });

  it('a turn that fails ends with an error part; a dropped input with error and finish', async () => {
    a.server.enqueue({ status: 400 });
    const failed = await drain(await send('ui-fail', 'hi'));
    const error = failed.find((c) => c.type === 'error') as any;
    expect(error.errorText).toEqual(expect.any(String));
    expect(failed.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error' });

    a.server.enqueue({ text: 'scheduled', hold: true });
    const firstCall = a.nextModelCall();
    const sourced = a.postAndWait({ sessionId: 'ui-drop-input', content: 'x', source: 'cron' });
    await firstCall;
    const queued = a.nextEvent(
      'agent:queue',
      (e) => e.sessionId === 'ui-drop-input' && !!e.waiting[0],
    );
    const waiting = await send('ui-drop-input', 'me');
    await queued;
    const abort = await a
      .http()
      .post('/agent/sessions/ui-drop-input/abort')
      .set(a.auth)
      .send({ queued: true });
    expect(abort.status).toBeLessThan(300);
    const chunks = await drain(waiting);
    await sourced;
    expect(chunks.find((c) => c.type === 'data-settlement')).toMatchObject({
      data: { settled: 'dropped', reason: 'aborted' },
    });
    expect(chunks.find((c) => c.type === 'error')).toMatchObject({
      errorText: 'The input was dropped (aborted) before any turn',
    });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'other' });
    expect(turnIdsOf(chunks)).toEqual([]);
  });

  it('a dropped connection does not stop the turn; reconnectToStream replays it from its start', async () => {
    expect(await transport.reconnectToStream({ chatId: 'ui-none' })).toBeNull();
    a.server.enqueue({ text: 'one two three four', chunks: 4, hold: true });
    const controller = new AbortController();
    const { seen, reader } = await readUntil(
      await send('ui-drop', 'go', { abortSignal: controller.signal }),
      (c) => c.type === 'text-delta',
    );
    controller.abort();
    await reader.cancel().catch(() => undefined);
    const resumed = await transport.reconnectToStream({ chatId: 'ui-drop' });
    const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === 'ui-drop');
    a.server.release();
    const chunks = await drain(resumed!);
    expect((await ended).outcome).toBe('replied');
    expect(chunks.slice(0, seen.length)).toEqual(seen);
    expect(textOf(chunks)).toBe('one two three four');
    // The turn's latest usage report comes with the replay (once, before the finish).
    const usage = chunks.filter((c) => c.type === 'data-usage');
    expect(usage).toHaveLength(1);
    expect(chunks.findIndex((c) => c.type === 'data-usage')).toBeLessThan(chunks.length - 1);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });

  it('with abortOnDisconnect, closing the stream (stop()) stops the turn', async () => {
    a.server.enqueue({ text: 'never finished', chunks: 3, hold: true });
    const controller = new AbortController();
    const stream = await send('ui-stop', 'go', {
      abortSignal: controller.signal,
      body: { abortOnDisconnect: true },
    });
    const { reader } = await readUntil(stream, (c) => c.type === 'text-delta');
    const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === 'ui-stop');
    controller.abort();
    await reader.cancel().catch(() => undefined);
    expect((await ended).outcome).toBe('aborted');
  });

  it('bad bodies are refused with 400 naming the field; no token is 401', async () => {
    const post = (body: unknown) =>
      a
        .http()
        .post('/agent/ui/chat')
        .set(a.auth)
        .send(body as object);
    const empty = await post({});
    expect(empty.status).toBe(400);
    expect(Object.keys(empty.body.fields)).toEqual(expect.arrayContaining(['id', 'messages']));
    const role = await post({ id: 's', messages: [{ id: 'm', role: 'robot', parts: [] }] });
    expect(Object.keys(role.body.fields)).toEqual(['messages.0.role']);
    const last = await post({ id: 's', messages: [{ id: 'm', role: 'assistant', parts: [] }] });
    expect(last.status).toBe(400);
    expect(Object.keys(last.body.fields)).toEqual(['messages']);
    const flag = await post({ id: 's', messages: [user('m', 'x')], abortOnDisconnect: 'yes' });
    expect(Object.keys(flag.body.fields)).toEqual(['abortOnDisconnect']);
    expect((await a.http().post('/agent/ui/chat').send({})).status).toBe(401);
    expect((await a.http().get('/agent/ui/chat/s/stream')).status).toBe(401);
  });
});
