import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import { Client } from 'pg';
import {
  createSqlStores,
  FencedWriteError,
  WellKnownMetadataKeys as K,
  type SqlStores,
} from '../../src';
import { LeaseFencing } from '../../src/distribution/redis/lease-fencing';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { SessionLeases } from '../../src/distribution/redis/session-leases';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/**
 * Leases in Redis and fences in PostgreSQL together: an instance that holds a session's lease
 * writes under its fence; once its lease expired (it was paused and did not renew) and another
 * instance took the session and claimed a newer fence, nothing the first one still writes for a
 * turn lands, whether or not it has noticed the loss yet.
 */

const LEASE_MS = 300;

/** One instance: its Redis client, leases, fencing and stores. */
interface Instance {
  redis: Redis;
  leases: SessionLeases;
  fencing: LeaseFencing;
  stores: SqlStores;
  /** Sessions whose lease this instance found lost (`onLost`), in order. */
  lost: string[];
}

describeRedis('distribution: leases and fences together', () => {
  describePg('on PostgreSQL', () => {
    let prefix: string;
    let db: TempDb;
    const instances: Instance[] = [];

    async function instance(id: string): Promise<Instance> {
      const redis = testRedis();
      const lost: string[] = [];
      const leases = new SessionLeases(redis, {
        prefix,
        instanceId: id,
        leaseMs: LEASE_MS,
        onLost: (grant) => lost.push(grant.sessionId),
      });
      const fencing = new LeaseFencing(leases);
      const stores = await createSqlStores(db.url, { fencing });
      const made = { redis, leases, fencing, stores, lost };
      instances.push(made);
      return made;
    }

    /** Takes the session's lease with the store's fence as floor, and claims the fence. */
    async function takeOver(holder: Instance, sessionId: string): Promise<number> {
      const floor = await holder.stores.fences.current(sessionId);
      const grant = await holder.leases.acquire(sessionId, floor);
      if (!grant) throw new Error('the lease is held');
      holder.fencing.granted(grant);
      expect(await holder.stores.fences.claim(sessionId, grant.fence)).toBe(true);
      return grant.fence;
    }

    const write = (holder: Instance, sessionId: string, turnId: string, content: string) =>
      holder.stores.log.append([
        { sessionId, role: 'assistant', content, metadata: { [K.TurnId]: turnId } },
      ]);

    /** Polls until the session's lease is gone (it expires after LEASE_MS without renewal). */
    async function leaseExpired(sessionId: string): Promise<void> {
      const redis = instances[0].redis;
      const until = Date.now() + 5 * LEASE_MS;
      while (await redis.exists(new RedisKeys(prefix).lease(sessionId))) {
        if (Date.now() > until) throw new Error('the lease did not expire');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }

    beforeEach(async () => {
      prefix = testPrefix();
      db = await tempPgSchema();
    });

    afterEach(async () => {
      for (const i of instances.splice(0)) {
        i.leases.stop();
        await i.stores.close();
        await i.redis.quit();
      }
      await deletePrefix(prefix);
      await db.drop();
    });

    it('a paused holder cannot write for its turn after a takeover, before or after it notices', async () => {
      const sid = `s-${randomUUID()}`;
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      const first = await takeOver(a, sid);
      await write(a, sid, 't-a', 'from a, while it held the lease');

      // A is "paused": it does not renew, its lease expires, B takes the session.
      await leaseExpired(sid);
      const second = await takeOver(b, sid);
      expect(second).toBeGreaterThan(first);

      // A has not noticed: it still believes it holds the session under the old fence.
      expect(a.leases.grantOf(sid)?.fence).toBe(first);
      const refused = await write(a, sid, 't-a', 'late').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(FencedWriteError);
      expect(refused).toMatchObject({ fence: first, current: second });
      // The refusal is how A notices: the grant is lost now, not at its next renewal.
      expect(a.lost).toEqual([sid]);
      expect(a.leases.grantOf(sid)).toBeUndefined();
      expect(await a.leases.renewAll()).toEqual([]);
      // Its turn still writes: still refused, and the loss is not reported again.
      await expect(write(a, sid, 't-a', 'later')).rejects.toBeInstanceOf(FencedWriteError);
      expect(a.lost).toEqual([sid]);
      // Accepting an input is any instance's right; settling it for the old turn is not.
      const id = `in-${randomUUID()}`;
      await a.stores.inbox.accept({ id, sessionId: sid, content: 'x' });
      const end = { settled: 'turn', turnId: 't-a', outcome: 'replied' } as const;
      await expect(a.stores.inbox.settle([id], end)).rejects.toBeInstanceOf(FencedWriteError);
      expect((await b.stores.inbox.get(id))?.settlement).toBeUndefined();

      await write(b, sid, 't-b', 'from b');
      expect((await b.stores.log.history(sid)).map((m) => m.content)).toEqual([
        'from a, while it held the lease',
        'from b',
      ]);
    });

    it('an input another instance accepted is recorded here under the fence without reading its session, and a wrong hint only costs that read', async () => {
      const sid = `s-${randomUUID()}`;
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      await takeOver(a, sid);
      const [hinted, misled] = [`in-${randomUUID()}`, `in-${randomUUID()}`];
      for (const id of [hinted, misled])
        await b.stores.inbox.accept({ id, sessionId: sid, content: id });
      // What the holder's lane does when it enters an input drained from the pending list.
      a.fencing.runs(hinted, sid);
      a.fencing.runs(misled, 'another-session');
      const sent: string[] = [];
      const query = Client.prototype.query;
      const spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (
        this: Client,
        ...args: unknown[]
      ) {
        const text = args[0] as string | { text?: string };
        sent.push(typeof text === 'string' ? text : String(text?.text));
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      });
      try {
        await a.stores.inbox.enterTurn([hinted], 't-a');
        expect(sent).toHaveLength(1);
        expect(sent[0]).toMatch(/for share/);
        sent.length = 0;
        await a.stores.inbox.enterTurn([misled], 't-a');
        expect(sent.some((text) => /select .*session_id.* from "inbox"/.test(text))).toBe(true);
      } finally {
        spy.mockRestore();
      }
      expect((await b.stores.inbox.get(hinted))?.turnId).toBe('t-a');
      expect((await b.stores.inbox.get(misled))?.turnId).toBe('t-a');

      // Fenced all the same: after B takes the session over, A's settlement is refused.
      await leaseExpired(sid);
      await takeOver(b, sid);
      const end = { settled: 'turn', turnId: 't-a', outcome: 'replied' } as const;
      await expect(a.stores.inbox.settle([hinted], end)).rejects.toBeInstanceOf(FencedWriteError);
      expect((await b.stores.inbox.get(hinted))?.settlement).toBeUndefined();
    });

    it('a Redis that lost the fence counter still grants a newer fence than the database has seen', async () => {
      const sid = `s-${randomUUID()}`;
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      for (let i = 0; i < 3; i++) {
        const grant = a.leases.grantOf(sid) ?? (await a.leases.acquire(sid));
        await a.leases.release(grant!);
      }
      const held = await takeOver(a, sid);
      await write(a, sid, 't-a', 'a');
      // Redis restarted without persistence: lease and counter are gone.
      await a.redis.del(new RedisKeys(prefix).lease(sid), new RedisKeys(prefix).fence(sid));
      const taken = await takeOver(b, sid);
      expect(taken).toBeGreaterThan(held);
      await expect(write(a, sid, 't-a', 'late')).rejects.toBeInstanceOf(FencedWriteError);
    });
  });
});
