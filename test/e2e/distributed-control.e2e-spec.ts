import { Queue } from 'bullmq';
import { ModelNotFoundError } from '../../src';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { WAKE_QUEUE, type WakeJob } from '../../src/distribution/redis/wake-queue';
import { describePg } from '../contracts/sql-test-db';
import { useDistributedApps, waitFor, type DistributedApp } from '../support/distributed-apps';
import { describeRedis, redisConnection, testRedis } from '../support/redis-test';

jest.setTimeout(30_000);

/**
 * Control from an instance that does not run the session, and repeated deliveries, with two
 * instances as a library host runs them (`AgentModule.forRoot({ distribution })`) on one Redis
 * prefix and one PostgreSQL schema: a model assigned on one is what the next turn uses wherever
 * it runs (S6); an input delivered twice, to one instance or to both, settles once, is archived
 * once and runs in one turn; a wake job delivered twice runs nothing twice.
 */
describeRedis('distributed control and repeated deliveries (two instances)', () => {
  describePg('on PostgreSQL', () => {
    const t = useDistributedApps();

    /** A turn of `s` running on its holder with its model reply held: holder, other, turn. */
    async function running(a: DistributedApp, b: DistributedApp, content = 'H1') {
      const first = a.harness.agent.handleMessage({ sessionId: 's', content });
      const start = await t.apps.turnStart(
        (e) => e.sessionId === 's' && e.inputs.some((m) => m.content === content),
      );
      await t.server.nextRequest();
      const [holder] = t.apps.ranOn(start.turnId);
      const other = holder === a ? b : a;
      return { first, turnId: start.turnId, holder, other };
    }

    /** Resolves once no instance holds the session's lease (its holder let it go). */
    const idle = async (sessionId: string) => {
      const redis = testRedis();
      try {
        const key = new RedisKeys(t.prefix).lease(sessionId);
        await waitFor(async () => (await redis.exists(key)) === 0, 'the lease let go');
      } finally {
        redis.disconnect();
      }
    };

    /** Resolves once every wake job ran (one held elsewhere comes back after a lease). */
    const noJobs = (queue: Queue<WakeJob>) =>
      waitFor(
        async () => (await queue.getJobCountByTypes('wait', 'active', 'delayed')) === 0,
        'the wake jobs',
        15_000,
      );

    const contents = async (sessionId: string) =>
      (await t.apps.apps[0].harness.stored(sessionId)).map((m) => m.content);

    it('S6: a model assigned on the other instance while a turn runs is the one the next turn uses', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R3' });
      const { first, holder, other } = await running(a, b);

      await other.harness.agent.assignModel('s', { model: 'other-model' });
      // Queued behind the running turn on the holder; it opens the next turn there.
      const second = other.harness.agent.handleMessage({ sessionId: 's', content: 'H2' });
      await holder.harness.waitFor(
        'agent:queue',
        (q) => q.sessionId === 's' && q.waiting.length === 1,
      );
      t.server.release();
      await expect(first).resolves.toMatchObject({ settled: 'turn', reply: 'R1' });
      await expect(second).resolves.toMatchObject({ settled: 'turn', reply: 'R2' });
      // The running turn kept its model; the next one took the assigned one.
      expect(t.server.requests.map((r) => r.model)).toEqual(['test-model', 'other-model']);

      // Idle again, the session's next turn may run on either instance: still the assigned model.
      await idle('s');
      await expect(
        other.harness.agent.handleMessage({ sessionId: 's', content: 'H3' }),
      ).resolves.toMatchObject({ settled: 'turn', reply: 'R3' });
      expect(t.server.requests.map((r) => r.model)).toEqual([
        'test-model',
        'other-model',
        'other-model',
      ]);
      expect(await a.harness.agent.getSession('s')).toMatchObject({
        settings: { model: { model: 'other-model' } },
      });
    });

    it('S6: a model no provider serves is refused on the other instance with ModelNotFoundError, and nothing changes', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const { first, other } = await running(a, b);

      await expect(
        other.harness.agent.assignModel('s', { provider: 'nope', model: 'x' }),
      ).rejects.toBeInstanceOf(ModelNotFoundError);
      t.server.release();
      await first;
      await idle('s');
      await other.harness.agent.handleMessage({ sessionId: 's', content: 'H2' });
      expect(t.server.requests.map((r) => r.model)).toEqual(['test-model', 'test-model']);
    });

    it('S1: an input delivered twice to each instance while its session runs settles once, is archived once and runs in one turn', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R0', hold: true }, { text: 'R1' });
      const { first, holder } = await running(a, b, 'H0');

      const input = { id: 'dup-1', sessionId: 's', content: 'H1' };
      const deliveries = [
        a.harness.agent.handleMessage(input),
        b.harness.agent.handleMessage({ ...input }),
        a.harness.agent.handleMessage({ ...input }),
        b.harness.agent.handleMessage({ ...input }),
      ];
      // Every delivery went its way (the inbox has the input once) before the turn ends.
      await waitFor(async () => (await a.stores.inbox.get('dup-1')) !== undefined, 'accepted');
      await holder.harness.waitFor(
        'agent:queue',
        (q) => q.sessionId === 's' && q.waiting.length >= 1,
      );
      t.server.release();
      await expect(first).resolves.toMatchObject({ settled: 'turn', reply: 'R0' });
      const settled = await Promise.all(deliveries);
      expect(settled[0]).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
      for (const other of settled.slice(1)) expect(other).toEqual(settled[0]);

      await idle('s');
      expect(await contents('s')).toEqual(['H0', 'R0', 'H1', 'R1']);
      const turnsWithH1 = t.apps
        .all('agent:turn:start')
        .filter((e) => e.inputs.some((m) => m.content === 'H1'));
      expect(turnsWithH1).toHaveLength(1);
      expect(turnsWithH1[0].inputs.filter((m) => m.content === 'H1')).toHaveLength(1);
      expect(t.server.requests).toHaveLength(2);

      // Delivered again once settled, to either instance: the first settlement, nothing run.
      for (const app of [a, b]) {
        await expect(app.harness.agent.handleMessage({ ...input })).resolves.toEqual(settled[0]);
      }
      expect(t.server.requests).toHaveLength(2);
      expect(await contents('s')).toEqual(['H0', 'R0', 'H1', 'R1']);
    });

    it('S1: an input delivered to both instances of an idle session at once runs once', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R1' }, { text: 'R-extra' });
      const input = { id: 'dup-2', sessionId: 's', content: 'H1' };
      const settled = await Promise.all([
        a.harness.agent.handleMessage(input),
        b.harness.agent.handleMessage({ ...input }),
      ]);
      expect(settled[0]).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
      expect(settled[1]).toEqual(settled[0]);
      await idle('s');
      expect(await contents('s')).toEqual(['H1', 'R1']);
      expect(t.server.requests).toHaveLength(1);
    });

    it('S1, S5: a repeat on the other instance follows the first delivery: no second preprocessing, no second run, even when the first settles first', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R1', hold: true }, { text: 'R-extra' });
      const preprocessedOnB: string[] = [];
      b.harness.agent.registerPreprocessor('count', async (message, next) => {
        preprocessedOnB.push(message.content);
        await next();
      });
      const input = { id: 'dup-3', sessionId: 's', content: 'H1' };
      const firstDelivery = a.harness.agent.handleMessage(input);
      await t.apps.turnStart((e) => e.sessionId === 's');
      await t.server.nextRequest();
      const repeat = b.harness.agent.handleMessage({ ...input });
      t.server.release();
      const settled = await firstDelivery;
      expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
      await expect(repeat).resolves.toEqual(settled);
      await idle('s');
      expect(preprocessedOnB).toEqual([]);
      expect(t.server.requests).toHaveLength(1);
      expect(await contents('s')).toEqual(['H1', 'R1']);
    });

    it('S1: a repeat of an input whose instance died before handing it over runs it once, a lease later, even after a clean release', async () => {
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R0' }, { text: 'R1' }, { text: 'R-extra' });
      // A turn before: the session was let go cleanly (its next grant would skip the takeover).
      await b.harness.agent.handleMessage({ sessionId: 's', content: 'H0' });
      await idle('s');
      const input = { id: 'dup-4', sessionId: 's', content: 'H1' };
      // Accepted in the inbox by an instance that died before it pushed the input anywhere.
      await b.stores.inbox.accept(input);
      const repeat = b.harness.agent.handleMessage({ ...input });
      await expect(repeat).resolves.toMatchObject({
        settled: 'turn',
        outcome: 'replied',
        reply: 'R1',
      });
      await idle('s');
      expect(t.server.requests).toHaveLength(2);
      expect(await contents('s')).toEqual(['H0', 'R0', 'H1', 'R1']);
    });

    it('a wake job delivered twice for a session (and once more after it ran) runs its inputs once', async () => {
      const a = await t.apps.start('inst-a');
      const b = await t.apps.start('inst-b');
      t.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R-extra' });
      const queue = new Queue<WakeJob>(WAKE_QUEUE, {
        connection: redisConnection(),
        prefix: t.prefix,
      });
      try {
        const { first, holder } = await running(a, b);
        const second = b.harness.agent.handleMessage({ sessionId: 's', content: 'H2' });
        await holder.harness.waitFor(
          'agent:queue',
          (q) => q.sessionId === 's' && q.waiting.length === 1,
        );
        // The same wake delivered again, to both instances, while the session runs: directly,
        // and as jobs of their own (no deduplication) the workers take.
        const outcomes = await Promise.all([a, b].map((i) => i.dispatcher.runWake('s')));
        expect(outcomes.sort()).toEqual(['held-elsewhere', 'running-here']);
        await queue.add(WAKE_QUEUE, { sessionId: 's' });
        await queue.add(WAKE_QUEUE, { sessionId: 's' });
        t.server.release();
        await expect(first).resolves.toMatchObject({ settled: 'turn', reply: 'R1' });
        await expect(second).resolves.toMatchObject({ settled: 'turn', reply: 'R2' });
        await noJobs(queue);
        await idle('s');

        // Delivered once more after the session went idle: nothing left to run.
        for (const i of [a, b]) await expect(i.dispatcher.runWake('s')).resolves.toBe('ran');
        await noJobs(queue);
        expect(t.server.requests).toHaveLength(2);
        expect(await contents('s')).toEqual(['H1', 'R1', 'H2', 'R2']);
        expect(t.apps.all('agent:turn:start')).toHaveLength(2);
      } finally {
        await queue.close();
      }
    });
  });
});
