import type Redis from 'ioredis';
import {
  LeaseGrant,
  SessionLeases,
  SessionLeasesOptions,
} from '../../src/distribution/redis/session-leases';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { Deferred } from '../support/deferred';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/** Resolves after `ms` (only where time passing is what a test is about). */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeRedis('SessionLeases on Redis', () => {
  let prefix: string;
  let keys: RedisKeys;
  let clients: Redis[];
  let leases: SessionLeases[];

  /** A SessionLeases on a client of its own (quit in afterEach). */
  function instance(instanceId: string, options: Partial<SessionLeasesOptions> = {}) {
    const redis = testRedis();
    clients.push(redis);
    const made = new SessionLeases(redis, { prefix, instanceId, leaseMs: 10_000, ...options });
    leases.push(made);
    return { leases: made, redis };
  }

  /** Polls `holder()` until the session is free; fails after `boundMs`. */
  async function untilFree(of: SessionLeases, sessionId: string, boundMs = 3000) {
    const deadline = Date.now() + boundMs;
    while ((await of.holder(sessionId)) !== undefined) {
      if (Date.now() > deadline) throw new Error(`${sessionId} still held after ${boundMs} ms`);
      await pause(20);
    }
  }

  beforeEach(() => {
    prefix = testPrefix();
    keys = new RedisKeys(prefix);
    clients = [];
    leases = [];
  });

  afterEach(async () => {
    for (const l of leases) l.stop();
    jest.restoreAllMocks();
    await Promise.all(clients.map((c) => (c.status === 'end' ? Promise.resolve('OK') : c.quit())));
    await deletePrefix(prefix);
  });

  it('of two instances racing for one session exactly one gets a grant, and holder() names it', async () => {
    const a = instance('a').leases;
    const b = instance('b').leases;
    const [ga, gb] = await Promise.all([a.acquire('s1'), b.acquire('s1')]);
    const grants = [ga, gb].filter((g) => g !== undefined);
    expect(grants).toHaveLength(1);
    const winner = ga ? 'a' : 'b';
    const holder = await a.holder('s1');
    expect(holder).toMatchObject({ instanceId: winner, fence: grants[0].fence });
    expect(holder!.ttlMs).toBeGreaterThan(0);
    expect(holder!.ttlMs).toBeLessThanOrEqual(10_000);
    expect((ga ? b : a).grantOf('s1')).toBeUndefined();
    expect((ga ? a : b).held()).toEqual([{ sessionId: 's1', fence: grants[0].fence }]);
  });

  it('fences only grow across acquire and release by alternating instances', async () => {
    const a = instance('a').leases;
    const b = instance('b').leases;
    const fences: number[] = [];
    for (let i = 0; i < 6; i++) {
      const who = i % 2 === 0 ? a : b;
      const grant = await who.acquire('s1');
      expect(grant).toBeDefined();
      fences.push(grant!.fence);
      expect(await who.release(grant!)).toBe(true);
    }
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
  });

  it('after Redis lost the fence counter, a floor of 41 grants fence 42', async () => {
    const { leases: a, redis } = instance('a');
    const first = await a.acquire('s1');
    expect(first?.fence).toBe(1);
    await a.release(first!);
    await redis.del(keys.fence('s1'), keys.lease('s1')); // Redis lost its data
    expect(await a.acquire('s1', 41)).toEqual({ sessionId: 's1', fence: 42 });
    expect(await redis.get(keys.fence('s1'))).toBe('42');
    expect(await redis.get(keys.lease('s1'))).toBe('a|42');
  });

  it("a release counts the inputs waiting in the session's pending list in the same round trip", async () => {
    const { leases: a, redis } = instance('a');
    const first = await a.acquire('s1');
    expect(await a.releaseCounting(first!, true)).toEqual({ released: true, pending: 0 });
    const second = await a.acquire('s1');
    await redis.rpush(keys.pending('s1'), 'x', 'y');
    expect(await a.releaseCounting(second!)).toEqual({ released: true, pending: 2 });
    // A stale grant deletes nothing but still counts.
    expect(await a.releaseCounting(second!)).toEqual({ released: false, pending: 2 });
  });

  it('a grant follows a clean release only when the grant just before it was let go cleanly', async () => {
    const { leases: a, redis } = instance('a');
    const b = instance('b').leases;
    // Never let go before: a takeover check is due.
    const first = await a.acquire('s1');
    expect(a.afterCleanRelease('s1')).toBe(false);
    await a.release(first!, true);
    // The next grant, on another instance, follows the clean release.
    const second = await b.acquire('s1');
    expect(b.afterCleanRelease('s1')).toBe(true);
    // Re-entrant: says nothing of how the run before ended.
    await b.acquire('s1');
    expect(b.afterCleanRelease('s1')).toBe(false);
    await b.release(second!); // not clean
    await a.acquire('s1');
    expect(a.afterCleanRelease('s1')).toBe(false);
    // A lease that ran out (its holder died) was never released: no clean mark for it.
    await a.release(a.grantOf('s1')!, true);
    await b.acquire('s1');
    await redis.del(keys.lease('s1')); // expired
    await a.acquire('s1');
    expect(a.afterCleanRelease('s1')).toBe(false);
    // A stale grant's clean release records nothing: the mark stays fence 3's.
    expect(await redis.get(keys.released('s1'))).toBe('3');
    expect(await a.release({ sessionId: 's1', fence: 1 }, true)).toBe(false);
    expect(await redis.get(keys.released('s1'))).toBe('3');
  });

  it('after Redis lost its data the floor lifts the fence and no clean release is assumed', async () => {
    const { leases: a, redis } = instance('a');
    await a.release((await a.acquire('s1'))!, true);
    await redis.del(keys.fence('s1')); // the counter lost, the mark kept
    await a.acquire('s1', 5);
    expect(a.grantOf('s1')?.fence).toBe(6);
    expect(a.afterCleanRelease('s1')).toBe(false);
  });

  it('a floor below the fence counter does not lower the fence', async () => {
    const { leases: a, redis } = instance('a');
    await redis.set(keys.fence('s1'), '50');
    expect(await a.acquire('s1', 7)).toEqual({ sessionId: 's1', fence: 51 });
  });

  it("a stale grant cannot release the new holder's lease", async () => {
    const a = instance('a', { leaseMs: 200 }).leases;
    const b = instance('b').leases;
    const stale = await a.acquire('s1');
    await untilFree(b, 's1'); // a's lease expires: the point of the wait
    const fresh = await b.acquire('s1');
    expect(fresh!.fence).toBeGreaterThan(stale!.fence);
    expect(await a.release(stale!)).toBe(false);
    expect(a.grantOf('s1')).toBeUndefined();
    expect(await b.holder('s1')).toMatchObject({ instanceId: 'b', fence: fresh!.fence });
  });

  it('release of a lease still ours deletes it and forgets the grant', async () => {
    const a = instance('a').leases;
    const grant = await a.acquire('s1');
    expect(await a.release(grant!)).toBe(true);
    expect(await a.holder('s1')).toBeUndefined();
    expect(a.held()).toEqual([]);
  });

  it('re-entrant acquire returns the same fence and extends the lease', async () => {
    const { leases: a, redis } = instance('a');
    const first = await a.acquire('s1');
    await redis.pexpire(keys.lease('s1'), 500);
    const again = await a.acquire('s1');
    expect(again).toEqual(first);
    expect((await a.holder('s1'))!.ttlMs).toBeGreaterThan(500);
    expect(await redis.get(keys.fence('s1'))).toBe(String(first!.fence));
  });

  it('concurrent acquires by one instance get the same grant', async () => {
    const a = instance('a').leases;
    const [g1, g2, g3] = await Promise.all([a.acquire('s1'), a.acquire('s1'), a.acquire('s1')]);
    expect(g1).toBeDefined();
    expect(g2).toEqual(g1);
    expect(g3).toEqual(g1);
  });

  it('another instance holding the session gets no grant', async () => {
    const a = instance('a').leases;
    const b = instance('b').leases;
    await a.acquire('s1');
    expect(await b.acquire('s1')).toBeUndefined();
    expect(b.held()).toEqual([]);
  });

  it('holder() parses an instance id containing | at the last |', async () => {
    const a = instance('host|7').leases;
    const grant = await a.acquire('s1');
    expect(await a.holder('s1')).toMatchObject({ instanceId: 'host|7', fence: grant!.fence });
    expect(await a.holder('free')).toBeUndefined();
  });

  it('renewAll keeps a lease alive past leaseMs', async () => {
    // A lease of 1 s renewed every 0.1 s: a CI stall of a few tenths of a second between two
    // renewals must not let it run out (a 0.2 s lease could).
    const a = instance('a', { leaseMs: 1000 }).leases;
    await a.acquire('s1');
    const until = Date.now() + 1500; // past leaseMs: time passing is the point
    while (Date.now() < until) {
      expect(await a.renewAll()).toEqual([]);
      await pause(100);
    }
    const holder = await a.holder('s1');
    expect(holder).toMatchObject({ instanceId: 'a' });
    expect(holder!.ttlMs).toBeGreaterThan(500);
  });

  it('one renewAll call renews 100 leases, in one script call', async () => {
    const { leases: a, redis } = instance('a', { leaseMs: 5000 });
    const ids = Array.from({ length: 100 }, (_, i) => `s${i}`);
    for (const id of ids) await a.acquire(id);
    await Promise.all(ids.map((id) => redis.pexpire(keys.lease(id), 1000)));
    const sent = jest.spyOn(redis, 'sendCommand');
    expect(await a.renewAll()).toEqual([]);
    const names = sent.mock.calls.map(([command]) => command.name);
    sent.mockRestore();
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^eval(sha)?$/);
    const ttls = await Promise.all(ids.map((id) => redis.pttl(keys.lease(id))));
    for (const ttl of ttls) expect(ttl).toBeGreaterThan(1000);
  });

  it("a write a store refused under a grant's fence loses that grant at once (onLost, once); a refusal of an older fence leaves a newer grant", async () => {
    const lostSeen: LeaseGrant[] = [];
    const { leases: a } = instance('a', { onLost: (g) => lostSeen.push(g) });
    const first = (await a.acquire('s1'))!;
    await a.release(first);
    const second = (await a.acquire('s1'))!;
    expect(second.fence).toBeGreaterThan(first.fence);

    // A late write of the turn of the first grant: the grant held now is not the one refused.
    a.lose('s1', first.fence);
    expect(lostSeen).toEqual([]);
    expect(a.grantOf('s1')).toEqual(second);

    a.lose('s1', second.fence);
    a.lose('s1', second.fence);
    expect(lostSeen).toEqual([second]);
    expect(a.grantOf('s1')).toBeUndefined();
    expect(a.held()).toEqual([]);
  });

  it('leases lost behind our back are reported once, through renewAll and onLost, and forgotten', async () => {
    const lostSeen: LeaseGrant[] = [];
    const { leases: a, redis } = instance('a', { onLost: (g) => lostSeen.push(g) });
    const deleted = await a.acquire('gone');
    const taken = await a.acquire('taken');
    const kept = await a.acquire('kept');
    await redis.del(keys.lease('gone'));
    await redis.set(keys.lease('taken'), `b|${taken!.fence + 1}`, 'PX', 10_000);
    const lost = await a.renewAll();
    expect(lost).toEqual(expect.arrayContaining([deleted, taken]));
    expect(lost).toHaveLength(2);
    expect(lostSeen).toEqual(lost);
    expect(a.held()).toEqual([kept]);
    expect(await a.renewAll()).toEqual([]);
    expect(lostSeen).toHaveLength(2);
    expect(await a.holder('taken')).toMatchObject({ instanceId: 'b' });
  });

  it('grants not renewed for leaseMs while Redis does not answer are reported lost', async () => {
    let clock = 1_000_000;
    const lostSeen: LeaseGrant[] = [];
    const { leases: a, redis } = instance('a', {
      leaseMs: 1000,
      now: () => clock,
      onLost: (g) => lostSeen.push(g),
    });
    const grant = await a.acquire('s1');
    redis.disconnect(); // Redis unreachable from here on
    clock += 999;
    await expect(a.renewAll()).rejects.toThrow();
    expect(a.held()).toEqual([grant]);
    expect(lostSeen).toEqual([]);
    clock += 1;
    await expect(a.renewAll()).rejects.toThrow();
    expect(lostSeen).toEqual([grant]);
    expect(a.held()).toEqual([]);
  });

  it('the renewal timer reports grants lost while a renewal hangs past leaseMs', async () => {
    let clock = 1_000_000;
    const lost = new Deferred<LeaseGrant>();
    const { leases: a, redis } = instance('a', {
      leaseMs: 1000,
      renewEveryMs: 10,
      now: () => clock,
      onLost: (g) => lost.resolve(g),
    });
    const grant = await a.acquire('s1');
    const sent = jest.spyOn(redis, 'sendCommand').mockReturnValue(new Promise(() => {})); // no answer
    a.start();
    for (let waited = 0; sent.mock.calls.length === 0; waited += 5) {
      if (waited > 2000) throw new Error('no renewal sent');
      await pause(5);
    }
    expect(lost.settled).toBe(false);
    expect(a.held()).toEqual([grant]);
    clock += 1000;
    expect(await lost.promise).toEqual(grant);
    expect(a.held()).toEqual([]);
    expect(sent).toHaveBeenCalledTimes(1); // the hanging renewal is not sent again meanwhile
  });

  it('the renewal timer keeps a lease alive, and after stop() it expires', async () => {
    // A 1 s lease (renewed every third of it): a CI stall of a few tenths of a second between
    // two renewals must not let it run out (a 0.2 s lease could).
    const a = instance('a', { leaseMs: 1000 }).leases;
    await a.acquire('s1');
    a.start();
    await pause(2500); // two and a half leases' time: time passing is the point
    expect(await a.holder('s1')).toMatchObject({ instanceId: 'a' });
    a.stop();
    await untilFree(a, 's1');
  });
});
