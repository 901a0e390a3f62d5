import { get_encoding } from 'tiktoken';
import {
  ControlKinds,
  HookRegistry,
  MessageArchive,
  ToolRegistry,
  type MessageArchive as MessageArchivePort,
  type NewMessage,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

describe('token usage (U1-U7)', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  async function seed(sessionId: string, messages: Omit<NewMessage, 'sessionId'>[]) {
    const archive = h.app.get<MessageArchivePort>(MessageArchive);
    await archive.append(messages.map((m) => ({ ...m, sessionId })));
  }

  function echo() {
    h.app.get(ToolRegistry).register({
      name: 'echo',
      description: 'echo',
      parameters: { type: 'object', properties: { t: { type: 'string' } } },
      handler: (a: { t?: string }) => a.t ?? '',
    });
  }

  it('U1 / U5 / I15: timeline 8 — one event per call, historyMessages 4, 7, 7 then 9', async () => {
    h = await AgentHarness.start();
    echo();
    await seed('s', [
      { role: 'user', content: 'old question', metadata: {} },
      { role: 'assistant', content: 'old answer', metadata: {} },
      { role: 'system', kind: ControlKinds.EventMarker, content: '', metadata: {} },
      { role: 'user', content: 'another', metadata: {} },
    ]);
    h.app.get(HookRegistry).use('agent:reply:before', async (ctx, next) => {
      if (ctx.attempt === 0 && ctx.content === 'unformatted') {
        ctx.retryRequested = true;
        ctx.maxRetries = 1;
      }
      await next();
    });
    h.server.enqueue(
      {
        toolCalls: [
          { name: 'echo', arguments: { t: 'a' } },
          { name: 'echo', arguments: { t: 'b' } },
        ],
      },
      { text: 'unformatted' },
      { text: 'formatted' },
      { text: 'second turn' },
    );
    const t1 = await h.agent.handleMessage({ sessionId: 's', content: 'H1' });
    await h.agent.handleMessage({ sessionId: 's', content: 'H2' });
    const usage = h.of('token:usage');
    expect(usage.map((u) => u.historyMessages)).toEqual([4, 7, 7, 9]);
    expect(usage.slice(0, 3).every((u) => u.turnId === (t1 as { turnId: string }).turnId)).toBe(
      true,
    );
    expect(usage.map((u) => u.trimmed)).toEqual([false, false, false, false]);
  });

  it('U2: used is the provider-reported prompt tokens, or the estimate when the provider reports none', async () => {
    h = await AgentHarness.start();
    h.server.enqueue(
      { text: 'a', usage: { prompt_tokens: 777, completion_tokens: 1 } },
      { text: 'b', usage: null },
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'one' });
    await h.agent.handleMessage({ sessionId: 's', content: 'two' });
    const [reported, estimated] = h.of('token:usage');
    expect(reported.used).toBe(777);
    expect(reported.usageRatio).toBeCloseTo(777 / reported.contextWindow, 10);
    const b = estimated.breakdown;
    expect(estimated.used).toBe(b.system + b.history + b.toolResults + b.toolDefs);
    // The estimate is tiktoken over the sent messages: the history holds 'one', 'a', 'two'.
    const enc = get_encoding('cl100k_base');
    try {
      const perMessage = (role: string, text: string) =>
        3 + enc.encode_ordinary(role).length + enc.encode_ordinary(text).length;
      expect(b.history).toBe(
        perMessage('user', 'one') + perMessage('assistant', 'a') + perMessage('user', 'two'),
      );
    } finally {
      enc.free();
    }
  });

  it('U3: a turn whose first call trims reports trimmed on every call of that turn, and not on the next', async () => {
    h = await AgentHarness.start({ agent: { tokenBudget: 1100, historyLimit: 0 } });
    echo();
    const long = 'lorem ipsum dolor sit amet '.repeat(60);
    await seed(
      's',
      Array.from({ length: 12 }, (_, i) => ({
        role: i % 2 ? ('assistant' as const) : ('user' as const),
        content: `${i}: ${long}`,
        metadata: {},
      })),
    );
    h.server.enqueue({ toolCalls: [{ name: 'echo', arguments: { t: 'x' } }] }, { text: 'done' });
    await h.agent.handleMessage({ sessionId: 's', content: 'summarise please' });
    const first = h.of('token:usage');
    expect(first.map((u) => u.trimmed)).toEqual([true, true]);
    expect(first[0].untrimmedHistory).toBeGreaterThan(
      first[0].breakdown.history + first[0].breakdown.toolResults,
    );
    // U4: trimmed content is still in the session's history.
    expect((await h.stored('s')).filter((m) => m.content.includes(long))).toHaveLength(12);
    // The sent list kept the input and fits the budget.
    const sent = h.server.requests[0].messages;
    expect(sent[sent.length - 1]).toEqual({ role: 'user', content: 'summarise please' });
    expect(
      first[0].breakdown.system + first[0].breakdown.history + first[0].breakdown.toolDefs,
    ).toBeLessThanOrEqual(1100);
    await h.history.clear('s');
    await h.agent.handleMessage({ sessionId: 's', content: 'short now' });
    expect(h.of('token:usage').at(-1)!.trimmed).toBe(false);
  });

  it('U4: untrimmedHistory equals history + tool results when nothing was trimmed', async () => {
    h = await AgentHarness.start();
    echo();
    h.server.enqueue({ toolCalls: [{ name: 'echo', arguments: { t: 'x' } }] }, { text: 'ok' });
    await h.agent.handleMessage({ sessionId: 's', content: 'go' });
    for (const u of h.of('token:usage')) {
      expect(u.untrimmedHistory).toBe(u.breakdown.history + u.breakdown.toolResults);
    }
  });

  it('U5: joined inputs count, control-kind markers do not', async () => {
    h = await AgentHarness.start();
    echo();
    await seed('s', [
      { role: 'user', content: 'q', metadata: {} },
      { role: 'system', kind: ControlKinds.TurnStopped, content: '[stopped]', metadata: {} },
      { role: 'system', kind: ControlKinds.EventMarker, content: '', metadata: {} },
    ]);
    h.server.enqueue(
      { toolCalls: [{ name: 'echo', arguments: { t: 'x' } }], hold: true },
      { text: 'ok' },
    );
    const first = h.agent.handleMessage({ sessionId: 's', content: 'H1' });
    await h.server.nextRequest();
    const joined = h.agent.handleMessage({ sessionId: 's', content: 'H2' });
    await h.waitFor('agent:queue', (e) => e.waiting.length === 1);
    h.server.release();
    await Promise.all([first, joined]);
    // call 1: 1 conversation message + H1; call 2: + assistant tool call + result + joined H2.
    expect(h.of('token:usage').map((u) => u.historyMessages)).toEqual([2, 5]);
  });

  it('U6: historyLimit is the session limit, 0 meaning none', async () => {
    h = await AgentHarness.start({ agent: { historyLimit: 0 } });
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(h.of('token:usage')[0].historyLimit).toBe(0);
    await h.close();
    h = await AgentHarness.start({ agent: { historyLimit: 7 } });
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    expect(h.of('token:usage')[0].historyLimit).toBe(7);
  });

  it('U5: historyMessages includes messages beyond the count limit that were not sent', async () => {
    h = await AgentHarness.start({ agent: { historyLimit: 2 } });
    await seed(
      's',
      Array.from({ length: 6 }, (_, i) => ({
        role: 'user' as const,
        content: `m${i}`,
        metadata: {},
      })),
    );
    await h.agent.handleMessage({ sessionId: 's', content: 'now' });
    const sent = h.server.requests[0].messages.filter((m: any) => m.role === 'user');
    expect(sent.map((m: any) => m.content)).toEqual(['m4', 'm5', 'now']);
    expect(h.of('token:usage')[0].historyMessages).toBe(7);
  });

  it('U7: breakdown has the twelve buckets and parts are display rows without the reply reservation', async () => {
    h = await AgentHarness.start();
    echo();
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    const u = h.of('token:usage')[0];
    expect(Object.keys(u.breakdown).sort()).toEqual(
      [
        'system',
        'persona',
        'memorySummary',
        'memoryVector',
        'skills',
        'platform',
        'subtask',
        'systemOther',
        'history',
        'toolResults',
        'toolDefs',
        'reservedForReply',
      ].sort(),
    );
    expect(u.breakdown.reservedForReply).toBe(u.maxTokens);
    expect(u.parts.map((p) => p.label)).toEqual(['Persona', 'History', 'Tool definitions']);
    const b = u.breakdown;
    expect(u.parts.reduce((sum, p) => sum + p.tokens, 0)).toBe(
      b.system + b.history + b.toolResults + b.toolDefs,
    );
  });

  it('U1 / T2: token:request is answered with a snapshot without a model call or turn id', async () => {
    h = await AgentHarness.start();
    await h.agent.handleMessage({ sessionId: 's', content: 'x' });
    const calls = h.server.requests.length;
    const { EventEmitter2 } = await import('@nestjs/event-emitter');
    const snapshotSeen = h.waitFor('token:usage', (u) => u.turnId === undefined);
    h.app.get(EventEmitter2).emit('token:request', { sessionId: 's' });
    const snapshot = await snapshotSeen;
    expect(h.server.requests.length).toBe(calls);
    expect(snapshot).toMatchObject({ sessionId: 's', historyMessages: 2, trimmed: false });
    expect(snapshot.untrimmedHistory).toBe(
      snapshot.breakdown.history + snapshot.breakdown.toolResults,
    );
  });

  it('issue 5: each persisted message carries its token count, and later turns use it instead of recounting', async () => {
    h = await AgentHarness.start();
    await h.agent.handleMessage({ sessionId: 's', content: 'first question', userId: 'u' });
    const [input, reply] = await h.stored('s');
    expect(input.metadata.tokenCount).toEqual({ cl100k_base: expect.any(Number) });
    expect(reply.metadata.tokenCount).toEqual({ cl100k_base: expect.any(Number) });
    const firstHistory = h.of('token:usage')[0].breakdown.history;
    expect((input.metadata.tokenCount as { cl100k_base: number }).cl100k_base).toBe(firstHistory);
    // Rewrite the stored counts: a later turn must take them as they are.
    await h.history.clear('s');
    const archive = h.app.get<MessageArchivePort>(MessageArchive);
    await archive.append([
      { ...input, metadata: { ...input.metadata, tokenCount: { cl100k_base: 1000 } } },
      { ...reply, metadata: { ...reply.metadata, tokenCount: { cl100k_base: 2000 } } },
    ]);
    await h.agent.handleMessage({ sessionId: 's', content: 'second', userId: 'u' });
    const second = h.of('token:usage')[1];
    const newInput = (await h.stored('s'))[2].metadata.tokenCount as { cl100k_base: number };
    expect(second.breakdown.history).toBe(1000 + 2000 + newInput.cl100k_base);
  });

  it('issue 5: a very large history text is counted off the event loop, not inline', async () => {
    h = await AgentHarness.start();
    const { TokenEstimator } = await import('../../src');
    const estimator = h.app.get(TokenEstimator);
    const huge = 'word '.repeat(40_000);
    await seed('big', [{ role: 'user', content: huge, metadata: {} }]);
    const inline = jest.spyOn(estimator, 'countText');
    const offLoop = jest.spyOn(estimator, 'countTextAsync');
    await h.agent.handleMessage({ sessionId: 'big', content: 'and now?' });
    expect(inline.mock.calls.some(([text]) => text.length > 20_000)).toBe(false);
    expect(offLoop.mock.calls.some(([text]) => text.length > 20_000)).toBe(true);
    expect(h.of('token:usage')[0].breakdown.history).toBeGreaterThan(40_000);
  });
});
