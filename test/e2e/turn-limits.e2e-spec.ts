import { Logger } from '@nestjs/common';
import { ControlKinds, WellKnownMetadataKeys as K, type Settlement } from '../../src';
import { AgentHarness } from '../support/agent-harness';

/**
 * The engine's bounds (hardening): a bounded waiting list, a turn deadline, tool calls the model
 * was not offered, a tool-round limit that ends with a reason, and idle topic openers that are
 * never archived. Each against a real local OpenAI-compatible server.
 */
describe('turn limits and idle openers', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  const kinds = async (sessionId: string) =>
    (await h.stored(sessionId)).map((m) => m.kind ?? m.role);

  it('S8: past maxWaiting a new input settles dropped (queue-full) at once and the list does not change', async () => {
    h = await AgentHarness.start({ agent: { maxWaiting: 2 } });
    h.server.enqueue({ text: 'first', hold: true }, { text: 'second' }, { text: 'third' });
    const running = h.agent.handleMessage({ sessionId: 's', content: 'run', source: 'job' });
    await h.server.nextRequest();
    const waiting = [
      h.agent.handleMessage({ sessionId: 's', content: 'w1', source: 'job' }),
      h.agent.handleMessage({ sessionId: 's', content: 'w2', source: 'job' }),
    ];
    await h.waitFor('agent:queue', (e) => e.waiting.length === 2);
    const queueEvents = h.of('agent:queue').length;

    const refused = await h.agent.handleMessage({ sessionId: 's', content: 'w3', source: 'job' });

    expect(refused).toEqual({ settled: 'dropped', reason: 'queue-full' });
    expect(h.agent.waiting('s').map((m) => m.content)).toEqual(['w1', 'w2']);
    expect(h.of('agent:queue')).toHaveLength(queueEvents);
    h.server.release();
    await Promise.all([running, ...waiting]);
    expect((await h.stored('s')).map((m) => m.content)).not.toContain('w3');
  });

  it('H4: a turn past turnTimeoutMs is stopped and ends error saying it took too long; the next turn works', async () => {
    h = await AgentHarness.start({ agent: { turnTimeoutMs: 300 } });
    h.server.enqueue({ text: 'never', hold: true }, { text: 'back again' });
    const started = performance.now();

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'slow' });

    expect(performance.now() - started).toBeLessThan(3000);
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
    expect((settled as Extract<Settlement, { settled: 'turn' }>).error).toMatch(/took too long/);
    const notices = h.of('outbound:message').filter((m) => m.source === 'system');
    expect(notices.map((m) => m.content)).toEqual([expect.stringMatching(/took too long/)]);
    h.server.release();
    expect(await h.agent.handleMessage({ sessionId: 's', content: 'again' })).toMatchObject({
      outcome: 'replied',
      reply: 'back again',
    });
  });

  it('a model that calls a tool it was not offered gets the unknown-tool result and answers', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ toolCalls: [{ name: 'launch', arguments: {} }] }, { text: 'sorry' });

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'go' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'sorry' });
    const tool = (await h.stored('s')).find((m) => m.role === 'tool');
    expect(tool?.content).toContain('Unknown tool');
    expect(JSON.stringify(h.server.requests[1].messages)).toContain('Unknown tool');
  });

  it('a turn whose last allowed call still asks for tools ends with a notice, not in silence', async () => {
    h = await AgentHarness.start({ agent: { maxToolIterations: 1 } });
    h.server.enqueue(
      { toolCalls: [{ name: 'launch', arguments: {} }] },
      { toolCalls: [{ name: 'launch', arguments: {} }] },
    );

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'go' });

    expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
    expect((settled as Extract<Settlement, { settled: 'turn' }>).error).toMatch(
      /still asked for tools after 1 rounds/,
    );
    expect(h.server.requests).toHaveLength(2);
  });

  it('H1: an idle topic opener is never archived; the reply is', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'Anyone around?' });

    const settled = await h.agent.handleMessage({
      sessionId: 's',
      content: '[quiet for an hour]',
      source: 'idle-trigger',
    });

    expect(settled).toMatchObject({ outcome: 'replied' });
    const stored = await h.stored('s');
    expect(stored.map((m) => [m.role, m.content])).toEqual([['assistant', 'Anyone around?']]);
    expect(stored[0].metadata[K.TurnRecord]).toEqual({
      outcome: 'replied',
      source: 'idle-trigger',
    });
    expect(JSON.stringify(h.server.requests[0].messages)).toContain('[quiet for an hour]');
  });

  it('H1 / P5: a stopped idle turn with nothing else in history writes no stop marker', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'never', hold: true });
    const running = h.agent.handleMessage({
      sessionId: 's',
      content: 'idle',
      source: 'idle-trigger',
    });
    await h.server.nextRequest();

    expect(h.agent.abort('s')).toBe(true);

    expect(await running).toMatchObject({ outcome: 'aborted' });
    expect(await kinds('s')).toEqual([ControlKinds.EventMarker]);
  });

  it('H1 / S3: an idle opener dropped with the queue is not archived', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'never', hold: true });
    const running = h.agent.handleMessage({ sessionId: 's', content: 'human' });
    await h.server.nextRequest();
    const idle = h.agent.handleMessage({ sessionId: 's', content: 'idle', source: 'idle-trigger' });
    const job = h.agent.handleMessage({ sessionId: 's', content: 'job', source: 'job' });
    await h.waitFor('agent:queue', (e) => e.waiting.length === 2);

    h.agent.abort('s', { queued: true });

    expect(await idle).toEqual({ settled: 'dropped', reason: 'aborted' });
    await Promise.all([running, job]);
    const contents = (await h.stored('s')).map((m) => m.content);
    expect(contents).toContain('job');
    expect(contents).not.toContain('idle');
  });

  it('S3: what users wrote reaches the log escaped: a forged line in a reason or a session id stays on one line', async () => {
    const logged: string[] = [];
    const spy = jest.spyOn(Logger.prototype, 'log').mockImplementation((message: unknown) => {
      logged.push(String(message));
    });
    try {
      h = await AgentHarness.start();
      h.server.enqueue({ text: 'never', hold: true });
      const sessionId = 'evil\nINFO forged line';
      const running = h.agent.handleMessage({ sessionId, content: 'hi' });
      await h.server.nextRequest();
      h.agent.abort(sessionId, { reason: 'stop\u001b[31m\nERROR forged' });
      await running;
    } finally {
      spy.mockRestore();
    }
    const line = logged.find((l) => l.includes('ended aborted'));
    expect(line).toBeDefined();
    expect([line!.includes('\n'), line!.includes('\u001b')]).toEqual([false, false]);
    expect(line).toContain('"evil\\nINFO forged line"');
    expect(line).toContain('(reason: "stop\\u001b[31m\\nERROR forged")');
  });
});
