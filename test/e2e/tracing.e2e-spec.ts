import { EventEmitter2 } from '@nestjs/event-emitter';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { HookRegistry, OpenAiCompatibleProvider, ToolRegistry } from '../../src';
import { FakeOpenAiServer } from '../../src/testing';
import { AgentHarness } from '../support/agent-harness';
import { parentIdOf, SpanRecorder, stringsOf } from '../support/span-recorder';

describe('tracing with no OpenTelemetry SDK registered', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  it('records nothing and stamps no traceparent on inputs; hook runs are not timed', async () => {
    h = await AgentHarness.start({ agent: { traceHookThresholdMs: 0 } });
    const seen: unknown[] = [];
    h.app.get(HookRegistry).use('agent:llm:before', async (ctx, next) => {
      seen.push(trace.getActiveSpan());
      await next();
    });
    h.server.enqueue({ text: 'ok' });

    await h.agent.handleMessage({ sessionId: 's', content: 'hi' });

    expect(seen).toEqual([undefined]);
    const [start] = h.of('agent:turn:start');
    expect(start.inputs[0].traceparent).toBeUndefined();
  });
});

describe('tracing (OpenTelemetry spans through @opentelemetry/api)', () => {
  let spans: SpanRecorder;
  let h: AgentHarness;

  beforeAll(() => {
    spans = SpanRecorder.register();
  });
  afterAll(() => spans.unregister());
  beforeEach(() => spans.reset());
  afterEach(() => h?.close());

  function echoTool(): void {
    h.app.get(ToolRegistry).register({
      name: 'echo',
      description: 'Echoes its text',
      parameters: { type: 'object', properties: { text: { type: 'string' } } },
      handler: (args: { text?: string }) => ({ echoed: args.text }),
    });
  }

  function turnIdOf(settlement: { settled: string; turnId?: string }): string {
    if (settlement.settled !== 'turn' || !settlement.turnId) throw new Error('no turn');
    return settlement.turnId;
  }

  it('T1 / T2: one trace per input: agent.input > invoke_agent > chat {model} x2 and execute_tool {name}, with the GenAI attributes', async () => {
    h = await AgentHarness.start();
    echoTool();
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'secret words' }, id: 'call_1' }] },
      { text: 'done', usage: { prompt_tokens: 40, completion_tokens: 7 } },
    );

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'private hello' });
    const turnId = turnIdOf(settled);

    const input = spans.one('agent.input');
    const turn = spans.one('invoke_agent');
    const chats = spans.named('chat test-model');
    const tool = spans.one('execute_tool echo');
    expect(parentIdOf(input)).toBeUndefined();
    expect(parentIdOf(turn)).toBe(input.spanContext().spanId);
    expect(chats).toHaveLength(2);
    for (const span of [...chats, tool]) {
      expect(parentIdOf(span)).toBe(turn.spanContext().spanId);
      expect(span.spanContext().traceId).toBe(input.spanContext().traceId);
    }
    expect(input.attributes).toMatchObject({
      'gen_ai.conversation.id': 's',
      'agent.input.settled': 'turn',
      'agent.turn.id': turnId,
    });
    expect(turn.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.conversation.id': 's',
      'agent.turn.id': turnId,
      'agent.turn.outcome': 'replied',
      'agent.turn.inputs.opened': 1,
      'agent.turn.inputs.joined': 0,
      'agent.turn.model_calls': 2,
      'agent.turn.tool_calls': 1,
    });
    expect(chats[0].kind).toBe(SpanKind.CLIENT);
    expect(chats[0].attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'test-model',
      'gen_ai.response.model': 'test-model',
      'gen_ai.response.finish_reasons': ['tool_calls'],
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
      'agent.usage.used': 10,
      'agent.usage.trimmed': false,
      'agent.turn.id': turnId,
    });
    expect(chats[1].attributes).toMatchObject({
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 40,
      'gen_ai.usage.output_tokens': 7,
      'agent.usage.used': 40,
    });
    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'echo',
      'gen_ai.tool.call.id': h.of('tool:execute')[0].callId,
      'agent.turn.id': turnId,
    });
    expect(tool.status.code).not.toBe(SpanStatusCode.ERROR);
    // No content by default: neither the input, the tool's arguments nor the reply.
    const carried = spans.spans.flatMap(stringsOf).join('\n');
    expect(carried).not.toMatch(/private hello|secret words|done/);
  });

  it('T2: a failing tool is an execute_tool span with status error and the error text', async () => {
    h = await AgentHarness.start();
    h.app.get(ToolRegistry).register({
      name: 'boom',
      description: 'Fails',
      parameters: { type: 'object', properties: {} },
      handler: () => {
        throw new Error('the disk is full');
      },
    });
    h.server.enqueue({ toolCalls: [{ name: 'boom', arguments: {} }] }, { text: 'sorry' });

    await h.agent.handleMessage({ sessionId: 's', content: 'go' });

    const tool = spans.one('execute_tool boom');
    expect(tool.status.code).toBe(SpanStatusCode.ERROR);
    expect(tool.status.message).toContain('the disk is full');
  });

  it('S2 / I2: an input that joins a running turn links its span to the turn, and the turn links back', async () => {
    h = await AgentHarness.start();
    echoTool();
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }], hold: true },
      { text: 'both answered' },
    );
    const first = h.agent.handleMessage({ sessionId: 's', content: 'one' });
    await h.server.nextRequest();
    const second = h.agent.handleMessage({ sessionId: 's', content: 'two' });
    await h.waitFor('agent:queue', (e) => e.waiting.length === 1);
    h.server.release();

    const [a, b] = await Promise.all([first, second]);
    const turnId = turnIdOf(a);
    expect(turnIdOf(b)).toBe(turnId);

    const turn = spans.one('invoke_agent');
    const inputs = spans.named('agent.input');
    const opener = inputs.find((s) => parentIdOf(turn) === s.spanContext().spanId)!;
    const joiner = inputs.find((s) => s !== opener)!;
    expect(opener).toBeDefined();
    expect(joiner.attributes['agent.turn.id']).toBe(turnId);
    expect(turn.attributes['agent.turn.inputs.joined']).toBe(1);
    expect(turn.links.map((l) => l.context.spanId)).toContain(joiner.spanContext().spanId);
    expect(joiner.links.map((l) => l.context.spanId)).toContain(turn.spanContext().spanId);
  });

  it('S3: an abort is an agent.abort event on the turn with who did it, never its reason', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'a long answer', chunks: 3, hold: true });
    const settled = h.agent.handleMessage({ sessionId: 's', content: 'hi' });
    await h.server.nextRequest();

    expect(
      h.agent.abort('s', { reason: 'the user was rude', by: { platform: 'web', userId: 'u1' } }),
    ).toBe(true);
    await settled;

    const turn = spans.one('invoke_agent');
    expect(turn.attributes['agent.turn.outcome']).toBe('aborted');
    expect(turn.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(turn.events.map((e) => [e.name, e.attributes])).toContainEqual([
      'agent.abort',
      { 'agent.by.platform': 'web', 'agent.by.user_id': 'u1' },
    ]);
    expect(spans.spans.flatMap(stringsOf).join('\n')).not.toContain('rude');
  });

  it('S4 / S7: clearing and deletion are agent.clear and agent.delete events on the turn they stop', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'first', hold: true }, { text: 'second', hold: true });
    const cleared = h.agent.handleMessage({ sessionId: 'c', content: 'hi' });
    await h.server.nextRequest();
    await h.agent.clearHistory(['c'], 'the clearing reason');
    await cleared;
    const deleted = h.agent.handleMessage({ sessionId: 'd', content: 'hi' });
    await h.server.nextRequest();
    // A host's session manager deletes: it emits session:deleted and awaits the listeners (S7).
    await h.app.get(EventEmitter2).emitAsync('session:deleted', { sessionId: 'd' });
    await deleted;

    const events = (sessionId: string) =>
      spans.one('invoke_agent', { 'gen_ai.conversation.id': sessionId }).events.map((e) => e.name);
    expect(events('c')).toContain('agent.clear');
    expect(events('d')).toContain('agent.delete');
    expect(spans.spans.flatMap(stringsOf).join('\n')).not.toContain('the clearing reason');
  });

  it('traceContent: true records the input, the messages sent, the answer and the tool call', async () => {
    h = await AgentHarness.start({ agent: { traceContent: true } });
    echoTool();
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { text: 'secret words' } }] },
      { text: 'done' },
    );

    await h.agent.handleMessage({ sessionId: 's', content: 'private hello' });

    expect(spans.one('agent.input').attributes['agent.input.content']).toBe('private hello');
    const [first, second] = spans.named('chat test-model');
    expect(String(first.attributes['gen_ai.input.messages'])).toContain('private hello');
    expect(String(second.attributes['gen_ai.output.messages'])).toContain('done');
    const tool = spans.one('execute_tool echo');
    expect(tool.attributes['gen_ai.tool.call.arguments']).toBe('{"text":"secret words"}');
    expect(String(tool.attributes['gen_ai.tool.call.result'])).toContain('secret words');
  });

  it('a hook middleware slower than traceHookThresholdMs on its own is a span with its hook and owner', async () => {
    h = await AgentHarness.start({ agent: { traceHookThresholdMs: 20 } });
    const hooks = h.app.get(HookRegistry);
    hooks.use(
      'agent:llm:before',
      async (_ctx, next) => {
        await new Promise((resolve) => setTimeout(resolve, 30));
        await next();
      },
      { owner: 'SlowPlugin' },
    );
    // Fast on its own, though the rest of the chain (the slow one) runs inside its `next`.
    hooks.use('agent:llm:before', (_ctx, next) => next(), { owner: 'FastPlugin', priority: -1 });
    h.server.enqueue({ text: 'ok' });

    await h.agent.handleMessage({ sessionId: 's', content: 'hi' });

    const hook = spans.one('agent.hook agent:llm:before');
    expect(hook.attributes).toMatchObject({
      'agent.hook.name': 'agent:llm:before',
      'agent.hook.owner': 'SlowPlugin',
    });
    expect(Number(hook.attributes['agent.hook.self_ms'])).toBeGreaterThanOrEqual(20);
    expect(parentIdOf(hook)).toBe(spans.one('invoke_agent').spanContext().spanId);
  });

  it('a retried model call carries each retry as an agent.retry event', async () => {
    const server = await FakeOpenAiServer.start();
    h = await AgentHarness.start({
      server,
      agent: {
        llmProvider: new OpenAiCompatibleProvider({
          baseURL: server.url,
          defaultModel: 'test-model',
          maxRetries: 1,
          baseDelayMs: 1,
        }),
      },
    });
    server.enqueue({ status: 503 }, { text: 'ok' });

    await h.agent.handleMessage({ sessionId: 's', content: 'hi' });
    await server.close();

    const chat = spans.one('chat test-model');
    expect(chat.events.map((e) => [e.name, e.attributes?.['error.type']])).toEqual([
      ['agent.retry', '503'],
    ]);
  });

  it('an input handled inside a host span (its HTTP request, say) joins that trace', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'ok' });
    const tracer = trace.getTracer('host');

    await tracer.startActiveSpan('POST /chat', async (request) => {
      await h.agent.handleMessage({ sessionId: 's', content: 'hi' });
      request.end();
    });

    const request = spans.one('POST /chat');
    expect(parentIdOf(spans.one('agent.input'))).toBe(request.spanContext().spanId);
    expect(spans.one('invoke_agent').spanContext().traceId).toBe(request.spanContext().traceId);
  });
});
