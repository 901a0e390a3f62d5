import { AgentHarness } from '../support/agent-harness';

describe('smoke', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  it('H4: a plain input is answered and persisted with a turn record', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'Hello there', chunks: 3 });
    const settled = await h.agent.handleMessage({ sessionId: 's1', content: 'hi', userId: 'u1' });
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'Hello there' });
    const stored = await h.stored('s1');
    expect(stored.map((m) => [m.role, m.content])).toEqual([
      ['user', 'hi'],
      ['assistant', 'Hello there'],
    ]);
    expect(h.of('outbound:stream').filter((e) => e.done)).toHaveLength(1);
  });
});
