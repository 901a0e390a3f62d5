import { describePg } from '../contracts/sql-test-db';
import { useDistributedApps, waitFor } from '../support/distributed-apps';
import { describeRedis } from '../support/redis-test';
import { parentIdOf, SpanRecorder } from '../support/span-recorder';

/**
 * Across instances the trace context travels with the input (the inbox, the pending list in
 * Redis, the BullMQ wake job's data): ingress on one instance and the turn on another are one
 * trace, the turn's span a child of the input's.
 */
describeRedis('tracing in distributed mode', () => {
  describePg('two instances on PostgreSQL and Redis', () => {
    let spans: SpanRecorder;
    const t = useDistributedApps();

    beforeAll(() => {
      spans = SpanRecorder.register();
    });
    afterAll(() => spans.unregister());

    it('S1: an input sent to one instance and run on the holder is one trace: its invoke_agent is a child of its agent.input', async () => {
      const { harness: a } = await t.apps.start('trace-a');
      const { harness: b } = await t.apps.start('trace-b');
      t.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const first = a.agent.handleMessage({ sessionId: 's', content: 'H1' });
      await t.server.nextRequest();
      let holder = '';
      await waitFor(async () => {
        const [va, vb] = await Promise.all([a.agent.getSession('s'), b.agent.getSession('s')]);
        holder = va?.holder ?? '';
        return va?.state === 'running' && vb?.state === 'running' && va.holder === vb.holder;
      }, 'both instances to see the holder');
      const [running, other] = holder === 'trace-a' ? [a, b] : [b, a];

      // Sent to the instance that does not run the session: it waits there, runs on the holder.
      const second = other.agent.handleMessage({ sessionId: 's', content: 'H2' });
      await waitFor(() => other.agent.waiting('s').length === 1, 'H2 to wait');
      t.server.release();
      await first;
      const settled = await second;
      if (settled.settled !== 'turn') throw new Error(`H2 settled ${settled.settled}`);
      expect(running.of('agent:turn:end').map((e) => e.turnId)).toContain(settled.turnId);
      expect(other.of('agent:turn:end').map((e) => e.turnId)).not.toContain(settled.turnId);

      const input = spans.one('agent.input', { 'agent.turn.id': settled.turnId });
      const turn = spans.one('invoke_agent', { 'agent.turn.id': settled.turnId });
      expect(turn.spanContext().traceId).toBe(input.spanContext().traceId);
      expect(parentIdOf(turn)).toBe(input.spanContext().spanId);
      const chat = spans.one('chat test-model', { 'agent.turn.id': settled.turnId });
      expect(parentIdOf(chat)).toBe(turn.spanContext().spanId);
    }, 20_000);

    it('S1: an input for an idle session woken by a BullMQ job joins its trace on the instance that takes the job', async () => {
      const { harness: a } = await t.apps.start('trace-a');
      await t.apps.start('trace-b');
      t.server.enqueue({ text: 'R1' });

      const settled = await a.agent.handleMessage({ sessionId: 'idle', content: 'H1' });
      if (settled.settled !== 'turn') throw new Error(`H1 settled ${settled.settled}`);

      const input = spans.one('agent.input', { 'agent.turn.id': settled.turnId });
      const turn = spans.one('invoke_agent', { 'agent.turn.id': settled.turnId });
      expect(parentIdOf(turn)).toBe(input.spanContext().spanId);
      expect(turn.spanContext().traceId).toBe(input.spanContext().traceId);
    }, 20_000);
  });
});
