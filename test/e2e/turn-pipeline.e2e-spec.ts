import {
  ControlKinds,
  HookRegistry,
  OpenAiCompatibleProvider,
  SessionStore,
  ToolRegistry,
  type SessionStore as SessionStorePort,
  WellKnownMetadataKeys as K,
  type LlmBeforeContext,
  type Message,
  type ToolCallContext,
  type TurnAfterContext,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';
import { FakeOpenAiServer } from '../../src/testing';

const meta = (m: Message, key: string) => m.metadata[key];

describe('turn pipeline (T, P, H, I)', () => {
  let h: AgentHarness;
  let hooks: HookRegistry;
  let tools: ToolRegistry;

  async function boot(agent = {}) {
    h = await AgentHarness.start({ agent });
    hooks = h.app.get(HookRegistry);
    tools = h.app.get(ToolRegistry);
  }

  afterEach(async () => {
    await h?.close();
  });

  function echoTool(seen: ToolCallContext[] = []) {
    tools.register({
      name: 'echo',
      description: 'Echoes its text',
      parameters: {
        type: 'object',
        properties: { text: { type: 'string' } },
        required: ['text'],
      },
      handler: (args: { text: string }, ctx) => {
        seen.push(ctx);
        return { echoed: args.text };
      },
    });
    return seen;
  }

  it('T1: one turn id on turn:before/after, archived inputs, stream chunks, tools, usage and the reply', async () => {
    await boot();
    const contexts = echoTool();
    const seen: Record<string, string[]> = { before: [], after: [], llm: [] };
    hooks.use('agent:turn:before', async (ctx, next) => {
      seen.before.push(ctx.turnId);
      await next();
    });
    hooks.use('agent:turn:after', async (ctx, next) => {
      seen.after.push(ctx.turnId);
      await next();
    });
    hooks.use('agent:llm:before', async (ctx, next) => {
      seen.llm.push(ctx.turnId);
      await next();
    });
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'a' } }], text: 'checking' },
      { text: 'done here', chunks: 4 },
    );
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    expect(settled.settled).toBe('turn');
    const turnId = (settled as { turnId: string }).turnId;
    expect(seen.before).toEqual([turnId]);
    expect(seen.after).toEqual([turnId]);
    expect(seen.llm).toEqual([turnId, turnId]);
    const stream = h.of('outbound:stream');
    expect(stream.length).toBeGreaterThan(2);
    expect(stream.every((e) => e.turnId === turnId)).toBe(true);
    expect(contexts.map((c) => c.turnId)).toEqual([turnId]);
    expect(h.of('tool:execute').every((e) => e.turnId === turnId)).toBe(true);
    expect(h.of('token:usage').map((e) => e.turnId)).toEqual([turnId, turnId]);
    expect(h.of('outbound:message').map((m) => m.turnId)).toEqual([turnId]);
    const stored = await h.stored('s');
    expect(stored.every((m) => meta(m, K.TurnId) === turnId)).toBe(true);
  });

  it('I8, T2: every tool call has its own agent-generated callId, apart from the provider id', async () => {
    await boot();
    const contexts = echoTool();
    h.server.enqueue(
      {
        toolCalls: [
          { name: 'echo', arguments: { text: 'a' }, id: 'same' },
          { name: 'echo', arguments: { text: 'b' }, id: 'other' },
        ],
      },
      { text: 'ok' },
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    const callIds = contexts.map((c) => c.callId);
    expect(new Set(callIds).size).toBe(2);
    expect(callIds).not.toContain('same');
    const results = (await h.stored('s')).filter((m) => m.role === 'tool');
    expect(results.map((m) => m.toolCallId)).toEqual(['same', 'other']);
    expect(new Set(results.map((m) => meta(m, K.CallId)))).toEqual(new Set(callIds));
    const ends = h.of('tool:execute').filter((e) => e.phase === 'end');
    expect(new Set(ends.map((e) => e.callId))).toEqual(new Set(callIds));
  });

  it('T2: a token:request snapshot belongs to no turn', async () => {
    await boot();
    await h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    const snapshot = await h.agent.requestUsage('s');
    expect(snapshot.turnId).toBeUndefined();
    expect(snapshot.historyMessages).toBe(2);
  });

  it('P1: tool groups and the final reply carry their metadata; tool:after metadata is persisted', async () => {
    await boot({ selfId: 'bot-7' });
    echoTool();
    hooks.use('agent:tool:after', async (ctx, next) => {
      ctx.metadata.audit = { checked: true };
      await next();
    });
    h.server.enqueue(
      {
        toolCalls: [{ name: 'echo', arguments: { text: 'x' } }],
        usage: { prompt_tokens: 40, completion_tokens: 3 },
      },
      { text: 'final', usage: { prompt_tokens: 55, completion_tokens: 7 } },
    );
    const settled = await h.agent.handleMessage({
      sessionId: 's',
      content: 'go',
      platform: 'slack',
      groupId: 'g1',
      sessionKind: 'web',
    });
    const turnId = (settled as { turnId: string }).turnId;
    const [input, call, result, reply] = await h.stored('s');
    expect(input.role).toBe('user');
    expect(call.toolCalls?.[0].function.name).toBe('echo');
    expect(meta(call, K.TurnId)).toBe(turnId);
    expect(meta(result, K.TurnId)).toBe(turnId);
    expect(meta(result, K.CallId)).toEqual(expect.any(String));
    expect(meta(result, 'audit')).toEqual({ checked: true });
    expect(reply.metadata).toMatchObject({
      [K.TurnId]: turnId,
      [K.Model]: { provider: 'openai', model: 'test-model' },
      [K.Tokens]: { prompt: 55, completion: 10 },
      [K.Platform]: 'slack',
      [K.SelfId]: 'bot-7',
      [K.GroupId]: 'g1',
      [K.SessionKind]: 'web',
      [K.TurnRecord]: { outcome: 'replied' },
    });
  });

  it('P1: the decoded visible text of a structured-output envelope is recorded on the reply', async () => {
    await boot();
    hooks.use('agent:reply:before', async (ctx, next) => {
      const envelope = JSON.parse(ctx.content) as { reply: string };
      ctx.archiveContent = ctx.content;
      ctx.content = envelope.reply;
      ctx.visibleContent = envelope.reply;
      await next();
    });
    h.server.enqueue({ text: '{"reply":"Hi!","mood":"happy"}' });
    await h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    const reply = (await h.stored('s'))[1];
    expect(reply.content).toBe('{"reply":"Hi!","mood":"happy"}');
    expect(meta(reply, K.VisibleContent)).toBe('Hi!');
    expect(h.of('outbound:message')[0].content).toBe('Hi!');
  });

  it('P2: in a room only the final reply is sent; pre-tool text and retry drafts are persisted unsent', async () => {
    await boot();
    echoTool();
    let attempts = 0;
    hooks.use('agent:reply:before', async (ctx, next) => {
      attempts++;
      if (ctx.attempt === 0) {
        ctx.retryRequested = true;
        ctx.maxRetries = 1;
        ctx.retryFeedback = 'Say it politely.';
      }
      await next();
    });
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }], text: 'let me look' },
      { text: 'draft' },
      { text: 'polite final' },
    );
    await h.agent.handleMessage({
      sessionId: 'room1',
      content: 'go',
      sessionKind: 'room',
      userId: 'u',
    });
    expect(attempts).toBe(2);
    const sent = h.of('outbound:message');
    expect(sent.map((m) => m.content)).toEqual(['polite final']);
    const stored = await h.stored('room1');
    const assistant = stored.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => [m.content, meta(m, K.Sent)])).toEqual([
      ['let me look', false],
      ['draft', false],
      ['polite final', undefined],
    ]);
  });

  it('I4, P2: outside rooms the reply is also sent once per turn and nothing is marked unsent', async () => {
    await boot();
    echoTool();
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }], text: 'pre' },
      { text: 'final' },
    );
    await h.agent.handleMessage({ sessionId: 'w', content: 'go', sessionKind: 'web' });
    expect(h.of('outbound:message').map((m) => m.content)).toEqual(['final']);
    expect((await h.stored('w')).some((m) => meta(m, K.Sent) === false)).toBe(false);
  });

  it('P3: opening inputs are archived in order with turnId and turnEntry opened; rollback removes exactly the turn', async () => {
    await boot();
    h.server.enqueue({ text: 'first' }, { text: 'second' });
    const first = await h.agent.handleMessage({ sessionId: 's', content: 'one', userId: 'u1' });
    await h.agent.handleMessage({ sessionId: 's', content: 'two', userId: 'u1' });
    const stored = await h.stored('s');
    expect(stored[0]).toMatchObject({
      role: 'user',
      content: 'one',
      metadata: {
        [K.TurnEntry]: 'opened',
        [K.TurnId]: (first as { turnId: string }).turnId,
        [K.UserId]: 'u1',
      },
    });
    const removed = await h.history.rollbackTurn('s', (first as { turnId: string }).turnId);
    expect(removed).toBe(2);
    expect((await h.stored('s')).map((m) => m.content)).toEqual(['two', 'second']);
  });

  it('P4 / H4: silent turns persist an event marker carrying the turn record', async () => {
    await boot();
    h.server.enqueue({ text: '   ' });
    const settled = await h.agent.handleMessage({
      sessionId: 's',
      content: 'hm',
      source: 'scheduler',
    });
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'silent' });
    const stored = await h.stored('s');
    const marker = stored[stored.length - 1];
    expect(marker).toMatchObject({
      role: 'system',
      kind: ControlKinds.EventMarker,
      content: '',
      metadata: { [K.TurnRecord]: { outcome: 'silent', source: 'scheduler' } },
    });
    expect(h.of('outbound:message')).toHaveLength(0);
  });

  it('P4 / H4: a model error ends the turn with an [error] notice, an error record and no reply', async () => {
    await boot();
    h.server.enqueue({
      status: 400,
      body: { error: { message: 'bad request from test', type: 'invalid' } },
    });
    const afters: TurnAfterContext[] = [];
    hooks.use('agent:turn:after', async (ctx, next) => {
      afters.push({ ...ctx });
      await next();
    });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
    const notice = h.of('outbound:message')[0];
    expect(notice.content).toMatch(/^\[error\] .*bad request from test/);
    expect(notice.source).toBe('system');
    expect(notice.turnId).toBe((settled as { turnId: string }).turnId);
    expect(afters).toHaveLength(1);
    expect(afters[0].error).toBe(notice.content);
    expect(notice.content).not.toMatch(/\n|\s+at\s/);
    const marker = (await h.stored('s')).pop()!;
    expect(marker.metadata[K.TurnRecord]).toEqual({ outcome: 'error', error: notice.content });
    // The session keeps it as its last turn.
    const settings = await h.app.get<SessionStorePort>(SessionStore).get('s');
    expect(settings?.lastTurn).toEqual({
      turnId: (settled as { turnId: string }).turnId,
      outcome: 'error',
      error: notice.content,
      endedAt: expect.any(String),
    });
    expect(Date.parse(settings!.lastTurn!.endedAt!)).toBeGreaterThan(Date.now() - 60_000);
    expect(h.of('token:usage')).toHaveLength(0);
  });

  it('H4: with no model provider the notice is [system] and says how to configure one', async () => {
    await boot({ llmProvider: undefined });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
    const notice = h.of('outbound:message')[0];
    expect(notice.content).toMatch(/^\[system\] .*LLM_BASE_URL/);
    expect((settled as { error: string }).error).toBe(notice.content);
  });

  it('P5 / H4: an aborted turn with a persisted tool group writes the stop marker naming by, then its record', async () => {
    await boot();
    echoTool();
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] },
      { text: 'never', hold: true },
    );
    const done = h.agent.handleMessage({ sessionId: 's', content: 'go' });
    await h.server.nextRequest();
    await h.server.nextRequest();
    const turnId = (await h.waitFor('agent:turn:start')).turnId;
    expect(
      h.agent.abort('s', {
        turnId,
        by: { platform: 'web', userId: 'alice' },
        reason: 'pressed stop',
      }),
    ).toBe(true);
    const settled = await done;
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'aborted', turnId });
    const stored = await h.stored('s');
    const [stop, record] = stored.slice(-2);
    expect(stop).toMatchObject({ role: 'system', kind: ControlKinds.TurnStopped });
    expect(stop.content).toContain('web:alice');
    expect(record.metadata[K.TurnRecord]).toEqual({
      outcome: 'aborted',
      by: { platform: 'web', userId: 'alice' },
    });
    expect(JSON.stringify(stored)).not.toContain('pressed stop');
    expect(h.of('outbound:stream').filter((e) => e.done)).toEqual([
      { sessionId: 's', turnId, seq: expect.any(Number), done: true },
    ]);
  });

  it('H1: TurnInput.archived is set on every input by the time the turn runs', async () => {
    await boot();
    let archivedIds: (string | undefined)[] = [];
    hooks.use('agent:llm:before', async (ctx, next) => {
      archivedIds = ctx.inputs.map((i) => i.archived?.id);
      await next();
    });
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(archivedIds).toEqual([(await h.stored('s'))[0].id]);
  });

  it('H2: acceptsImages follows the per-model capability override; images are sent only then', async () => {
    await boot({ modelCapabilities: { 'test-model': { vision: true } } });
    const seen: boolean[] = [];
    hooks.use('agent:llm:before', async (ctx, next) => {
      seen.push(ctx.acceptsImages);
      await next();
    });
    const image = { kind: 'image' as const, data: 'data:image/png;base64,AAAA' };
    await h.agent.handleMessage({ sessionId: 's', content: 'look', attachments: [image] });
    expect(seen).toEqual([true]);
    const user = h.server.requests[0].messages.find((m: any) => m.role === 'user');
    expect(JSON.stringify(user.content)).toContain('image_url');
  });

  it('H2: without vision the image is not sent and tools see acceptsImages false', async () => {
    await boot();
    const contexts = echoTool();
    h.server.enqueue({ toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] }, { text: 'ok' });
    const image = { kind: 'image' as const, data: 'data:image/png;base64,AAAA' };
    await h.agent.handleMessage({ sessionId: 's', content: 'look', attachments: [image] });
    expect(contexts[0].acceptsImages).toBe(false);
    expect(JSON.stringify(h.server.requests[0].messages)).not.toContain('image_url');
  });

  it('H3: source in agent:llm:before equals the input source, absent for humans', async () => {
    await boot();
    const sources: (string | undefined)[] = [];
    hooks.use('agent:llm:before', async (ctx: LlmBeforeContext, next) => {
      sources.push(ctx.source);
      await next();
    });
    await h.agent.handleMessage({ sessionId: 's', content: 'x', source: 'scheduler:daily' });
    await h.agent.handleMessage({ sessionId: 's', content: 'y' });
    expect(sources).toEqual(['scheduler:daily', undefined]);
  });

  it('H5: tool contexts act with the actor identity over userId/platform', async () => {
    await boot();
    const contexts = echoTool();
    h.server.enqueue({ toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] }, { text: 'ok' });
    await h.agent.handleMessage({
      sessionId: 's',
      content: 'scheduled job',
      source: 'scheduler',
      userId: 'system',
      platform: 'cron',
      actor: { platform: 'slack', userId: 'creator-1' },
    });
    expect(contexts[0]).toMatchObject({
      userId: 'creator-1',
      platform: 'slack',
      source: 'scheduler',
    });
  });

  it('I9: exactly one stream-end marker per turn, also for blocked turns and discarded inputs', async () => {
    await boot();
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    const block = hooks.use('agent:turn:before', async () => undefined);
    const blocked = await h.agent.handleMessage({ sessionId: 's', content: 'blocked' });
    block();
    const discard = h.agent.registerPreprocessor('drop-all', async () => undefined);
    const discarded = await h.agent.handleMessage({ sessionId: 's', content: 'gone' });
    discard();
    expect(blocked).toMatchObject({ settled: 'dropped', reason: 'blocked' });
    expect(discarded).toEqual({ settled: 'discarded' });
    const ends = h.of('outbound:stream').filter((e) => e.done);
    expect(ends).toHaveLength(3);
    expect(ends[0].turnId).toEqual(expect.any(String));
    expect(ends[1].turnId).toEqual(expect.any(String));
    expect(ends[2].turnId).toBeUndefined();
  });

  it('H (turn:before): a blocked turn archives nothing, calls no model and fires no turn:after', async () => {
    await boot();
    let afters = 0;
    hooks.use('agent:turn:after', async (_ctx, next) => {
      afters++;
      await next();
    });
    hooks.use('agent:turn:before', async () => undefined);
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(afters).toBe(0);
    expect(h.server.requests).toHaveLength(0);
    expect(await h.stored('s')).toEqual([]);
  });

  it('I12: token:usage is emitted before agent:llm:after, so a throwing llm:after cannot suppress it', async () => {
    await boot();
    hooks.use('agent:llm:after', async () => {
      throw new Error('observer exploded');
    });
    h.server.enqueue({ text: 'hi', usage: { prompt_tokens: 321, completion_tokens: 2 } });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ outcome: 'error' });
    expect(h.of('token:usage').map((u) => u.used)).toEqual([321]);
  });

  it('I13: a throwing agent:turn:after middleware is logged and the hook fires once', async () => {
    await boot();
    let calls = 0;
    hooks.use('agent:turn:after', async () => {
      calls++;
      throw new Error('after exploded');
    });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ outcome: 'replied' });
    expect(calls).toBe(1);
  });

  it('I16: a provider without streaming is called once and its answer goes out as one chunk plus the end marker', async () => {
    const fake = await FakeOpenAiServer.start();
    const real = new OpenAiCompatibleProvider({
      baseURL: fake.url,
      defaultModel: 'm',
      maxRetries: 0,
    });
    // The same real provider without its `stream`: chat only.
    h = await AgentHarness.start({
      server: fake,
      agent: {
        llmProvider: {
          id: 'plain',
          defaultModel: 'm',
          capabilities: (m) => real.capabilities(m),
          chat: (r) => real.chat(r),
        },
      },
    });
    fake.enqueue({ text: 'whole answer' });
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(fake.requests[0].stream).not.toBe(true);
    expect(h.of('outbound:stream').map((e) => e.delta ?? (e.done ? 'END' : '?'))).toEqual([
      'whole answer',
      'END',
    ]);
    await h.close();
    await fake.close();
    h = undefined as unknown as AgentHarness;
  });

  it('tool loop: calls returned together run in parallel and their results go back in call order', async () => {
    await boot();
    const started: string[] = [];
    let releaseSlow!: () => void;
    const slowGate = new Promise<void>((resolve) => (releaseSlow = resolve));
    tools.register({
      name: 'slow',
      description: 'waits',
      parameters: { type: 'object', properties: {} },
      handler: async () => {
        started.push('slow');
        await slowGate;
        return 'slow result';
      },
    });
    tools.register({
      name: 'fast',
      description: 'answers at once',
      parameters: { type: 'object', properties: {} },
      handler: () => {
        started.push('fast');
        // Both calls are running: the slow one has not finished when the fast one starts.
        releaseSlow();
        return 'fast result';
      },
    });
    h.server.enqueue(
      {
        toolCalls: [
          { name: 'slow', arguments: {} },
          { name: 'fast', arguments: {} },
        ],
      },
      { text: 'both done' },
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    expect(started).toEqual(['slow', 'fast']);
    const second = h.server.requests[1].messages;
    expect(second.filter((m: any) => m.role === 'tool').map((m: any) => m.content)).toEqual([
      'slow result',
      'fast result',
    ]);
  });

  it('tool loop: unknown tools, invalid arguments, thrown errors and timeouts become results, never a crashed turn', async () => {
    await boot();
    tools.register({
      name: 'boom',
      description: 'throws',
      parameters: { type: 'object', properties: {} },
      handler: () => {
        throw new Error('kaput');
      },
    });
    tools.register({
      name: 'stuck',
      description: 'never answers',
      parameters: { type: 'object', properties: {} },
      timeoutMs: 20,
      handler: () => new Promise(() => undefined),
    });
    tools.register({
      name: 'typed',
      description: 'wants a number',
      parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
      handler: () => 'never',
    });
    h.server.enqueue(
      {
        toolCalls: [
          { name: 'missing', arguments: {} },
          { name: 'typed', arguments: '{not json' },
          { name: 'typed', arguments: { n: 'three' } },
          { name: 'boom', arguments: {} },
          { name: 'stuck', arguments: {} },
        ],
      },
      { text: 'recovered' },
    );
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    expect(settled).toMatchObject({ outcome: 'replied', reply: 'recovered' });
    const results = (await h.stored('s')).filter((m) => m.role === 'tool');
    expect(results).toHaveLength(5);
    const errors = results.map((m) => (JSON.parse(m.content) as { error: string }).error);
    expect(errors[0]).toMatch(/Unknown tool "missing"/);
    expect(errors[1]).toMatch(/not valid JSON/);
    expect(errors[2]).toMatch(/Invalid arguments for "typed"/);
    expect(errors[3]).toMatch(/kaput/);
    expect(errors[4]).toMatch(/timed out/);
    expect(results.every((m) => typeof m.metadata[K.CallId] === 'string')).toBe(true);
  });

  it('tool loop: at the iteration limit the model is asked for a final answer without tools', async () => {
    await boot({ maxToolIterations: 2 });
    echoTool();
    const call = { toolCalls: [{ name: 'echo', arguments: { text: 'again' } }] };
    h.server.enqueue(call, call, { ...call, text: 'final words' });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'loop' });
    expect(h.server.requests).toHaveLength(3);
    expect(h.server.requests[0].tools).toHaveLength(1);
    expect(h.server.requests[1].tools).toHaveLength(1);
    expect(h.server.requests[2].tools).toBeUndefined();
    expect(settled).toMatchObject({ outcome: 'replied', reply: 'final words' });
  });

  it('U1 / retry protocol: each retry is a model call without tools, carries the feedback and emits usage', async () => {
    await boot();
    echoTool();
    hooks.use('agent:reply:before', async (ctx, next) => {
      if (!ctx.content.startsWith('OK:')) {
        ctx.retryRequested = true;
        ctx.maxRetries = 3;
        ctx.retryFeedback = 'Start with OK:';
      }
      await next();
    });
    h.server.enqueue({ text: 'wrong' }, { text: 'still wrong' }, { text: 'OK: right' });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ outcome: 'replied', reply: 'OK: right' });
    expect(h.server.requests).toHaveLength(3);
    const retry = h.server.requests[1];
    expect(retry.tools).toBeUndefined();
    expect(retry.messages.slice(-2)).toEqual([
      { role: 'assistant', content: 'wrong' },
      { role: 'system', content: 'Start with OK:' },
    ]);
    expect(h.of('token:usage')).toHaveLength(3);
  });

  it('retry protocol: when retries run out and a retry is still requested, nothing goes out (silent)', async () => {
    await boot();
    hooks.use('agent:reply:before', async (ctx, next) => {
      ctx.retryRequested = true;
      ctx.maxRetries = 1;
      await next();
    });
    h.server.enqueue({ text: 'bad' }, { text: 'bad again' });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(settled).toMatchObject({ outcome: 'silent' });
    expect(h.of('outbound:message')).toHaveLength(0);
  });

  it('R1 / R2 / R3: contributions are materialised before agent:llm:before with the turn view, and attributed in usage', async () => {
    await boot();
    const { PromptAssembler } = await import('../../src');
    const views: unknown[] = [];
    h.app.get(PromptAssembler).register(
      {
        key: 'profile',
        bucket: 'systemOther',
        build: (view) => {
          views.push({
            inputs: view.inputs.map((i) => i.archived?.content),
            dryRun: view.dryRun,
            sessionId: view.sessionId,
          });
          return 'The user likes tea.';
        },
      },
      'ProfileModule',
    );
    let seenByHook: string[] = [];
    hooks.use('agent:llm:before', async (ctx, next) => {
      seenByHook = ctx.messages.filter((m) => m.role === 'system').map((m) => m.content);
      await next();
    });
    await h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    expect(seenByHook).toContain('The user likes tea.');
    expect(views).toEqual([{ inputs: ['hello'], dryRun: false, sessionId: 's' }]);
    const usage = h.of('token:usage')[0];
    const other = usage.parts.find((p) => p.injectors?.['ProfileModule/profile']);
    expect(other?.injectors?.['ProfileModule/profile']).toBeGreaterThan(0);
  });

  it('S6: assignModel needs session settings, validates the model, and the next turn uses it', async () => {
    await boot();
    await expect(h.agent.assignModel('nobody', { model: 'other-model' })).rejects.toThrow(
      /no settings/,
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'first' });
    await expect(h.agent.assignModel('s', { provider: 'nope', model: 'x' })).rejects.toThrow(
      /No provider/,
    );
    await h.agent.assignModel('s', { model: 'other-model' });
    await h.agent.handleMessage({ sessionId: 's', content: 'second' });
    expect(h.server.requests.map((r) => r.model)).toEqual(['test-model', 'other-model']);
  });

  it('I4: in rooms user messages name their speaker, the same way in every later turn', async () => {
    await boot();
    await h.agent.handleMessage({
      sessionId: 'r',
      content: 'hi all',
      sessionKind: 'room',
      userId: 'u1',
      nickname: 'Ann',
    });
    await h.agent.handleMessage({
      sessionId: 'r',
      content: 'me too',
      sessionKind: 'room',
      userId: 'u2',
    });
    const first = h.server.requests[0].messages.at(-1);
    const second = h.server.requests[1].messages;
    expect(first).toEqual({ role: 'user', content: '[Ann(u1)]: hi all' });
    expect(second.filter((m: any) => m.role === 'user').map((m: any) => m.content)).toEqual([
      '[Ann(u1)]: hi all',
      '[u2]: me too',
    ]);
    expect((await h.stored('r'))[0].content).toBe('hi all');
  });

  it('P1: the final reply records the turn timeline; each tool call segment carries its callId, also a call that failed before it ran', async () => {
    await boot();
    echoTool();
    h.server.enqueue(
      {
        toolCalls: [
          { name: 'echo', arguments: { text: 'x' } },
          { name: 'echo', arguments: '{broken' },
        ],
        text: 'Let me check. ',
      },
      { text: 'All done.', chunks: 3, reasoning: 'thinking it over' },
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    const stored = await h.stored('s');
    const results = stored.filter((m) => m.role === 'tool');
    const reply = stored.at(-1)!;
    const segments = reply.metadata[K.Segments] as Array<Record<string, unknown>>;
    expect(segments.map((seg) => seg.type)).toEqual([
      'text',
      'tool_call',
      'tool_call',
      'reasoning_text',
      'text',
    ]);
    expect(segments[0]).toEqual({ type: 'text', content: 'Let me check. ' });
    expect(segments[4]).toEqual({ type: 'text', content: 'All done.' });
    expect(segments[1]).toMatchObject({
      name: 'echo',
      ok: true,
      callId: results[0].metadata[K.CallId],
    });
    expect(segments[2]).toMatchObject({
      name: 'echo',
      ok: false,
      callId: results[1].metadata[K.CallId],
    });
    expect(h.of('outbound:message')[0].segments).toEqual(segments);
  });
});
