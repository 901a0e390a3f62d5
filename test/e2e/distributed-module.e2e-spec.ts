import {
  createSqlStores,
  DistributionOptionsError,
  LeaseFencing,
  RedisSettingsError,
  type AgentModuleOptions,
  type SqlStores,
} from '../../src';
import { AgentDistribution } from '../../src/agent';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, tempSqlite, type TempDb } from '../contracts/sql-test-db';
import { AgentHarness } from '../support/agent-harness';
import { RedisInstance } from '../support/redis-instance';
import {
  deletePrefix,
  describeRedis,
  REDIS_URL,
  testPrefix,
  testRedis,
} from '../support/redis-test';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';

/**
 * Distributed mode as a library host turns it on: `AgentModule.forRoot({ distribution })` with
 * PostgreSQL stores made with a `LeaseFencing`. Two applications share the sessions; a bad setup
 * stops the start with one line saying what to change.
 */
describeRedis('distributed mode through AgentModule options', () => {
  describePg('on PostgreSQL', () => {
    let server: FakeOpenAiServer;
    let db: TempDb;
    let prefix: string;
    const open: Array<{ close(): Promise<void> }> = [];

    async function stores(url = db.url): Promise<SqlStores> {
      const made = await createSqlStores(url, { fencing: new LeaseFencing() });
      open.push(made);
      return made;
    }

    function options(made: SqlStores, instanceId: string, redis = REDIS_URL): AgentModuleOptions {
      return {
        sessionStore: made.sessions,
        historyStore: made.log,
        messageArchive: made.log,
        inputInbox: made.inbox,
        distribution: { redis, stores: made, instanceId, prefix, leaseMs: 2_000 },
      };
    }

    async function app(made: SqlStores, instanceId: string): Promise<AgentHarness> {
      const harness = await AgentHarness.start({ server, agent: options(made, instanceId) });
      open.unshift(harness);
      return harness;
    }

    beforeEach(async () => {
      server = await FakeOpenAiServer.start();
      db = await tempPgSchema();
      prefix = testPrefix();
    });

    afterEach(async () => {
      server.release();
      for (const item of open.splice(0)) await item.close();
      await server.close();
      await deletePrefix(prefix);
      await db.drop();
    });

    it('S1: two applications share a session: each input is answered where it was sent', async () => {
      const a = await app(await stores(), 'host-a');
      const b = await app(await stores(), 'host-b');
      server.enqueue({ text: 'R1' }, { text: 'R2' }, { text: 'R3' });
      await expect(a.agent.handleMessage({ sessionId: 's', content: 'H1' })).resolves.toMatchObject(
        {
          settled: 'turn',
          outcome: 'replied',
          reply: 'R1',
        },
      );
      await expect(b.agent.handleMessage({ sessionId: 's', content: 'H2' })).resolves.toMatchObject(
        {
          settled: 'turn',
          outcome: 'replied',
          reply: 'R2',
        },
      );
      await expect(a.agent.handleMessage({ sessionId: 's', content: 'H3' })).resolves.toMatchObject(
        {
          reply: 'R3',
        },
      );
      expect((await b.stored('s')).map((m) => m.content)).toEqual([
        'H1',
        'R1',
        'H2',
        'R2',
        'H3',
        'R3',
      ]);
    });

    it('S9: an application closed as soon as its input settled lets the session go cleanly before Redis closes', async () => {
      const made = await stores();
      const a = await app(made, 'host-a');
      server.enqueue({ text: 'R1' });
      await expect(a.agent.handleMessage({ sessionId: 's', content: 'H1' })).resolves.toMatchObject(
        { reply: 'R1' },
      );
      open.splice(open.indexOf(a), 1);
      await a.close();
      const redis = testRedis();
      try {
        const keys = new RedisKeys(prefix);
        // Released (compare-and-delete, marked clean), not left to run out.
        expect(await redis.exists(keys.lease('s'))).toBe(0);
        expect(await redis.exists(keys.released('s'))).toBe(1);
      } finally {
        await redis.quit();
      }
    });

    it("S3, S8: the synchronous answers of an instance that does not run the session come from the holder's published view", async () => {
      const a = await app(await stores(), 'host-a');
      const b = await app(await stores(), 'host-b');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const first = a.agent.handleMessage({ sessionId: 's', content: 'H1' });
      await server.nextRequest();
      // Both instances learn who runs the session and its turn.
      let holder = '';
      await until(async () => {
        const [va, vb] = await Promise.all([a.agent.getSession('s'), b.agent.getSession('s')]);
        holder = va?.holder ?? '';
        return va?.state === 'running' && vb?.state === 'running' && va.holder === vb.holder;
      });
      const [running, other] = holder === 'host-a' ? [a, b] : [b, a];
      const turnId = running.agent.runningTurn('s')!;
      expect(other.agent.runningTurn('s')).toBe(turnId);
      expect(await other.agent.getSession('s')).toMatchObject({
        state: 'running',
        runningTurnId: turnId,
        holder,
      });

      // An input sent to the other instance waits on the holder; both see the waiting list.
      const second = other.agent.handleMessage({ sessionId: 's', content: 'H2' });
      await until(async () => other.agent.waiting('s').length === 1);
      expect(other.agent.waiting('s').map((m) => m.content)).toEqual(['H2']);

      // The synchronous abort answers from the view, and the stop reaches the holder.
      expect(other.agent.abort('s', { turnId: 'another-turn' })).toBe(false);
      expect(other.agent.abort('s', { turnId })).toBe(true);
      await expect(first).resolves.toEqual({ settled: 'turn', turnId, outcome: 'aborted' });
      await expect(second).resolves.toMatchObject({ settled: 'turn', outcome: 'replied' });
      await until(async () => (await other.agent.getSession('s'))?.state === 'idle');
      expect(other.agent.runningTurn('s')).toBeUndefined();
    });

    it('S1: distribution: { redis } is enough when the ports are fenced PostgreSQL stores (interface.md)', async () => {
      const made = await stores();
      const { stores: _given, ...withoutStores } = options(made, 'bare').distribution!;
      const a = await AgentHarness.start({
        server,
        agent: { ...options(made, 'bare'), distribution: withoutStores },
      });
      open.unshift(a);
      server.enqueue({ text: 'R1' });
      const settled = await a.agent.handleMessage({ sessionId: 's', content: 'H1' });
      expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
      expect(a.app.get(AgentDistribution).instanceId).toBe('bare');
      expect((await a.stored('s')).map((m) => m.content)).toEqual(['H1', 'R1']);
    });

    it('without stores and with ports that are not createSqlStores ones, the start stops with one line naming distribution.stores', async () => {
      const made = await stores();
      const { stores: _given, ...withoutStores } = options(made, 'x').distribution!;
      const failed = await AgentHarness.start({
        server,
        agent: { distribution: withoutStores },
      }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(DistributionOptionsError);
      expect((failed as Error).message).toMatch(/^distribution\.stores /);
      expect((failed as Error).message).not.toContain('\n');
    });

    it('SQLite stores stop the start with one line: distributed mode needs PostgreSQL', async () => {
      const file = tempSqlite();
      try {
        const made = await stores(file.url);
        const failed = await AgentHarness.start({ server, agent: options(made, 'x') }).catch(
          (e: unknown) => e,
        );
        expect(failed).toBeInstanceOf(DistributionOptionsError);
        expect((failed as Error).message).toMatch(
          /^distribution\.stores .*must be PostgreSQL stores/,
        );
        expect((failed as Error).message).not.toContain('\n');
      } finally {
        await file.drop();
      }
    });

    it('stores made without a LeaseFencing stop the start: their writes would not be fenced', async () => {
      const made = await createSqlStores(db.url);
      open.push(made);
      const failed = await AgentHarness.start({ server, agent: options(made, 'x') }).catch(
        (e: unknown) => e,
      );
      expect(failed).toBeInstanceOf(DistributionOptionsError);
      expect((failed as Error).message).toContain('new LeaseFencing()');
    });

    it('a Redis that may evict keys stops the start with one line naming maxmemory-policy', async () => {
      const redis = await RedisInstance.create({ args: ['--maxmemory-policy', 'allkeys-lru'] });
      try {
        const made = await stores();
        const failed = await AgentHarness.start({
          server,
          agent: options(made, 'x', redis.url),
        }).catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(RedisSettingsError);
        expect((failed as Error).message).toMatch(/^REDIS_URL: .*maxmemory-policy/);
      } finally {
        await redis.remove();
      }
    });
  });
});

/** Polls `done` (an instance's own answers, or a store read) every 10 ms for up to 5 s. */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
