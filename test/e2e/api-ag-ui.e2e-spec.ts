import { HttpAgent, type BaseEvent } from '@ag-ui/client';
import { ApiApp } from '../support/api-app';

describe('AG-UI (README: AG-UI)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  /** Runs the real `HttpAgent` on thread `threadId` with one user message; records its events. */
  async function run(threadId: string, runId: string, text: string) {
    const agent = new HttpAgent({
      url: `${a.url}/agent/ag-ui`,
      headers: a.auth,
      threadId,
      initialMessages: [{ id: `${runId}-user`, role: 'user', content: text }],
    });
    const events: BaseEvent[] = [];
    let failure: unknown;
    const result = await agent
      .runAgent({ runId }, { onEvent: ({ event }) => void events.push(event) })
      .catch((error: unknown) => {
        failure = error;
        return undefined;
      });
    return { agent, events, result, failure, types: events.map((e) => e.type as string) };
  }

  it('a turn with reasoning, a tool call and text, run by the real HttpAgent', async () => {
    a.server.enqueue(
      { toolCalls: [{ name: 'missing_tool', arguments: { q: 1 } }] },
      { text: 'Hello there', reasoning: 'Let me think', chunks: 2 },
    );
    const { events, types, result, failure, agent } = await run('agui-plain', 'run-1', 'hi');
    expect(failure).toBeUndefined();
    expect(types[0]).toBe('RUN_STARTED');
    expect(events[0]).toMatchObject({ threadId: 'agui-plain', runId: 'run-1' });
    expect(types.at(-1)).toBe('RUN_FINISHED');
    const finished = events.at(-1) as any;
    expect(finished).toMatchObject({ runId: 'run-1', result: { outcome: 'replied' } });
    const turn = events.find((e: any) => e.type === 'CUSTOM' && e.name === 'agent.turn') as any;
    expect(finished.result.turnId).toBe(turn.value.turnId);
    expect(types).toEqual(
      expect.arrayContaining([
        'TOOL_CALL_START',
        'TOOL_CALL_ARGS',
        'TOOL_CALL_END',
        'TOOL_CALL_RESULT',
        'REASONING_START',
        'REASONING_MESSAGE_CONTENT',
        'REASONING_END',
        'TEXT_MESSAGE_START',
        'TEXT_MESSAGE_END',
      ]),
    );
    expect(result?.result).toEqual({ turnId: turn.value.turnId, outcome: 'replied' });
    // The client built its messages from the events: the tool call, its result, the answer.
    const messages = agent.messages;
    const withCall = messages.find((m: any) => m.toolCalls?.length) as any;
    expect(withCall.toolCalls[0].function).toMatchObject({
      name: 'missing_tool',
      arguments: '{"q":1}',
    });
    expect(messages.find((m) => m.role === 'tool')).toBeTruthy();
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Hello there' });
  });

  it('two runs whose inputs share a turn: each gets its own runId and the same turnId', async () => {
    a.server.enqueue(
      { toolCalls: [{ name: 'missing_tool', arguments: {} }], hold: true },
      { text: 'both answered' },
    );
    const firstCall = a.nextModelCall();
    const first = run('agui-join', 'run-a', 'one');
    await firstCall;
    const pending = a.nextEvent(
      'agent:queue',
      (e) => e.sessionId === 'agui-join' && !!e.waiting[0],
    );
    const second = run('agui-join', 'run-b', 'two');
    await pending;
    a.server.release();
    const [ra, rb] = await Promise.all([first, second]);
    expect(ra.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', runId: 'run-a' });
    expect(rb.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', runId: 'run-b' });
    expect((rb.events.at(-1) as any).result).toEqual((ra.events.at(-1) as any).result);
    expect(rb.agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'both answered' });
  });

  it('a failing turn ends the run with RUN_ERROR', async () => {
    a.server.enqueue({ status: 400 });
    const { types, events } = await run('agui-fail', 'run-2', 'hi');
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_ERROR');
    expect((events.at(-1) as any).message).toEqual(expect.any(String));
  });

  it('raw SSE: encoded by the AG-UI encoder, with <turnId>:<seq> ids; bad bodies 400; no token 401', async () => {
    a.server.enqueue({ text: 'abc' });
    const body = {
      threadId: 'agui-raw',
      runId: 'r',
      messages: [{ id: 'm', role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
      protocolVersion: '1.0.0',
    };
    const res = await fetch(`${a.url}/agent/ag-ui`, {
      method: 'POST',
      headers: { ...a.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(text.startsWith('data: {"type":"RUN_STARTED"')).toBe(true);
    expect(text).toMatch(/^id: [^:\n]+:\d+$/m);

    const post = (b: unknown) =>
      a
        .http()
        .post('/agent/ag-ui')
        .set(a.auth)
        .send(b as object);
    const empty = await post({});
    expect(empty.status).toBe(400);
    expect(Object.keys(empty.body.fields)).toEqual(
      expect.arrayContaining(['threadId', 'runId', 'messages', 'tools', 'context']),
    );
    const assistant = await post({
      ...body,
      messages: [{ id: 'm', role: 'assistant', content: 'x' }],
    });
    expect(Object.keys(assistant.body.fields)).toEqual(['messages']);
    expect((await a.http().post('/agent/ag-ui').send(body)).status).toBe(401);
  });
});
