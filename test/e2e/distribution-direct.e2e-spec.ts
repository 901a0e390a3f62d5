import type Redis from 'ioredis';
import type { IncomingMessage } from '../../src';
import { wakeDirectOrphans } from '../../src/distribution/redis/orphan-wakes';
import { PendingInputs } from '../../src/distribution/redis/pending-inputs';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { SessionLeases, type LeaseGrant } from '../../src/distribution/redis/session-leases';
import { waitFor } from '../support/distributed-apps';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/**
 * Distributed mode's direct path on a real Redis: the push of an input for a session nobody
 * holds takes the session's lease for the instance that received it (one round trip, no wake
 * job), the release takes it off the direct set, and the heartbeat sweep finds the sessions
 * whose holder died with their lease unreleased.
 */
describeRedis('an idle session taken where its input came (Redis)', () => {
  let prefix: string;
  let keys: RedisKeys;
  let redis: Redis;
  let pending: PendingInputs;
  const made: SessionLeases[] = [];

  const leasesOf = (instanceId: string, leaseMs = 10_000) => {
    const leases = new SessionLeases(redis, { prefix, instanceId, leaseMs });
    made.push(leases);
    return leases;
  };
  let inputs = 0;
  const input = (sessionId: string, origin: string) => ({
    message: { id: `in-${++inputs}`, sessionId, content: 'hi' } as IncomingMessage & {
      id: string;
    },
    origin,
  });
  const direct = () => redis.zrange(keys.direct(), 0, -1);
  /** Redis' clock, ms: what the direct set's scores are on. */
  const redisNow = async () => {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };
  /** Takes the session for `instance` by a push with a lease of `leaseMs`, and adopts it. */
  const takeByPush = async (instance: SessionLeases, sessionId: string, leaseMs: number) => {
    const sentAt = instance.clock();
    const { granted } = await pending.push(input(sessionId, 'a'), undefined, leaseMs);
    return instance.adopt(sessionId, granted!.fence, granted!.clean, sentAt);
  };
  /** Resolves once Redis let the session's lease run out (its holder neither renewed nor released it). */
  const expired = (sessionId: string) =>
    waitFor(
      async () => (await redis.exists(keys.lease(sessionId))) === 0,
      `${sessionId}'s lease to run out`,
    );

  beforeEach(() => {
    prefix = testPrefix();
    keys = new RedisKeys(prefix);
    redis = testRedis();
    pending = new PendingInputs(redis, prefix);
  });

  afterEach(async () => {
    for (const leases of made.splice(0)) leases.stop();
    await redis.quit();
    await deletePrefix(prefix);
  });

  it('the push of an input for an idle session grants its lease to the receiving instance; a push while it is held grants nothing', async () => {
    const a = leasesOf('a');
    const pushed = await pending.push(input('s', 'a'), undefined, 10_000);
    expect(pushed).toEqual({ length: 1, poked: false, granted: { fence: 1, clean: false } });
    expect(await a.holder('s')).toMatchObject({ instanceId: 'a', fence: 1 });
    expect(await direct()).toEqual(['s']);
    // Held now (by a): b's push names the holder and takes nothing, nor does a's own.
    expect(await pending.push(input('s', 'b'), undefined, 10_000)).toEqual({
      holder: 'a',
      length: 2,
      poked: false,
    });
    expect(await pending.push(input('s', 'a'), undefined, 10_000)).toEqual({
      holder: 'a',
      length: 3,
      poked: false,
    });
    // Without a lease length the push never takes the session.
    expect(await pending.push(input('t', 'a'))).toEqual({ length: 1, poked: false });
    expect(await a.holder('t')).toBeUndefined();
  });

  it('a grant made by a push is recorded, renewed and released like an acquired one; after a clean release the next grant says so', async () => {
    const a = leasesOf('a');
    const sentAt = a.clock();
    const { granted } = await pending.push(input('s', 'a'), undefined, 10_000);
    const grant = a.adopt('s', granted!.fence, granted!.clean, sentAt);
    expect(a.grantOf('s')).toEqual(grant);
    expect(a.afterCleanRelease('s')).toBe(false);
    await redis.pexpire(keys.lease('s'), 500);
    expect(await a.renewAll()).toEqual([]);
    expect((await a.holder('s'))!.ttlMs).toBeGreaterThan(5_000);
    expect(await a.release(grant, true)).toBe(true);
    expect(await direct()).toEqual([]);

    const next = await pending.push(input('s', 'b'), undefined, 10_000);
    expect(next.granted).toEqual({ fence: grant.fence + 1, clean: true });
    // Acquired normally after that one: the counter goes on from it.
    await redis.del(keys.lease('s'));
    expect(await leasesOf('c').acquire('s')).toEqual({ sessionId: 's', fence: grant.fence + 2 });
  });

  it('adopting a grant replaces the grant the instance believed it held, which is reported lost', async () => {
    const lost: LeaseGrant[] = [];
    const a = new SessionLeases(redis, {
      prefix,
      instanceId: 'a',
      leaseMs: 10_000,
      onLost: (grant) => lost.push(grant),
    });
    made.push(a);
    const old = (await a.acquire('s'))!;
    await redis.del(keys.lease('s')); // as if it expired unnoticed
    const { granted } = await pending.push(input('s', 'a'), undefined, 10_000);
    const grant = a.adopt('s', granted!.fence, granted!.clean, a.clock());
    expect(lost).toEqual([old]);
    expect(a.held()).toEqual([grant]);
  });

  it('a release of a lease no longer its own leaves the new holder in the direct set', async () => {
    const a = leasesOf('a');
    const { granted } = await pending.push(input('s', 'a'), undefined, 10_000);
    const grant = a.adopt('s', granted!.fence, granted!.clean, a.clock());
    await redis.del(keys.lease('s')); // a's lease expired
    const b = leasesOf('b');
    const taken = await pending.push(input('s', 'b'), undefined, 10_000);
    b.adopt('s', taken.granted!.fence, taken.granted!.clean, b.clock());
    expect(await a.release(grant)).toBe(false);
    expect(await direct()).toEqual(['s']);
    expect(await a.sweepDirect()).toEqual([]);
  });

  it('the sweep returns, once, the sessions whose holder let their lease expire, and leaves those still held', async () => {
    const a = leasesOf('a', 300);
    await takeByPush(a, 'dead', 200);
    await takeByPush(a, 'alive', 10_000);
    await expired('dead'); // its holder died: the lease ran out unreleased
    const b = leasesOf('b');
    expect(await b.sweepDirect()).toEqual(['dead']);
    expect(await b.sweepDirect()).toEqual([]);
    expect(await direct()).toEqual(['alive']);
  });

  it('the direct set is scored by when each lease runs out: the sweep looks only at those due, and gives a renewed one its new end', async () => {
    const a = leasesOf('a');
    const before = await redisNow();
    await takeByPush(a, 'renewed', 1_000);
    await takeByPush(a, 'later', 10_000);
    const due = Number(await redis.zscore(keys.direct(), 'renewed'));
    expect(due).toBeGreaterThanOrEqual(before + 1_000);
    expect(due).toBeLessThanOrEqual((await redisNow()) + 1_000);
    // Renewed (as the holder's heartbeat does) before it ran out; then its first end passes.
    await redis.pexpire(keys.lease('renewed'), 10_000);
    await waitFor(async () => (await redisNow()) > due, 'the first end of the lease to pass');
    expect(await leasesOf('b').sweepDirect()).toEqual([]);
    const rescored = Number(await redis.zscore(keys.direct(), 'renewed'));
    const ttl = await redis.pttl(keys.lease('renewed'));
    const now = await redisNow();
    // The score is the lease's new end: now + what is left of it (the ms rounding aside).
    expect(Math.abs(rescored - (now + ttl))).toBeLessThanOrEqual(5);
    expect(rescored).toBeGreaterThan(due + 5_000);
    // The session not due yet keeps the score it was given.
    expect(Number(await redis.zscore(keys.direct(), 'later'))).toBeGreaterThanOrEqual(
      before + 10_000,
    );
    expect((await direct()).sort()).toEqual(['later', 'renewed']);
  });

  it('inputs drained and then not run go back to the head of their list, in their order', async () => {
    const pushed = [input('s', 'a'), input('s', 'b'), input('s', 'a')];
    for (const item of pushed.slice(0, 2)) await pending.push(item);
    await redis.set(keys.lease('s'), 'a|1', 'PX', 10_000);
    const holder = { instanceId: 'a', fence: 1 };
    const drained = await pending.drain('s', holder);
    await pending.push(pushed[2]); // came meanwhile: after them
    await pending.restore('s', drained);
    await pending.restore('s', []);
    expect(await pending.drain('s', holder)).toEqual(pushed);
  });

  it('wakeDirectOrphans wakes each orphaned session a lease later, and reports nothing when Redis fails', async () => {
    const a = leasesOf('a');
    for (const sessionId of ['x', 'y']) await takeByPush(a, sessionId, 200);
    for (const sessionId of ['x', 'y']) await expired(sessionId);
    const woken: Array<[string, number]> = [];
    const wake = {
      wake: (sessionId: string, delayMs: number) => {
        woken.push([sessionId, delayMs]);
        return Promise.resolve();
      },
    };
    const swept = await wakeDirectOrphans({ leases: a, wake, leaseMs: 2_000 });
    expect(swept.sort()).toEqual(['x', 'y']);
    expect(woken.sort()).toEqual([
      ['x', 2_000],
      ['y', 2_000],
    ]);
    const failing = { sweepDirect: () => Promise.reject(new Error('Redis away')) };
    await expect(wakeDirectOrphans({ leases: failing, wake, leaseMs: 2_000 })).resolves.toEqual([]);
  });
});
