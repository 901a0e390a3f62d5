import { Queue, Worker, type Job } from 'bullmq';
import type Redis from 'ioredis';
import { InstanceMailbox } from '../../src/distribution/redis/instance-mailbox';
import { InstanceRegistry } from '../../src/distribution/redis/instance-registry';
import { decodeEntry } from '../../src/distribution/redis/mailbox-wire';
import { PendingInputs } from '../../src/distribution/redis/pending-inputs';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { WAKE_QUEUE, WakeQueue, type WakeJob } from '../../src/distribution/redis/wake-queue';
import { Deferred } from '../support/deferred';
import {
  deletePrefix,
  describeRedis,
  redisConnection,
  testPrefix,
  testRedis,
} from '../support/redis-test';

/**
 * The two ways an input reaches the instance that runs its session in distributed mode: the
 * session's pending list (one order across instances) and, for an idle session, one BullMQ
 * wake job deduplicated by session id.
 */

const input = (sessionId: string, id: string, origin = 'inst-a') => ({
  message: { id, sessionId, content: `content of ${id}` },
  origin,
});

/** The holder a drain names: instance `inst-a`, fence 1. */
const HOLDER = { instanceId: 'inst-a', fence: 1 };

describeRedis('distribution: pending inputs', () => {
  let prefix: string;
  const clients: Redis[] = [];
  const client = () => {
    const redis = testRedis();
    clients.push(redis);
    return redis;
  };

  beforeEach(() => {
    prefix = testPrefix();
  });

  /** Gives the session's lease to `HOLDER`, as a grant would. */
  const hold = (sessionId: string) =>
    client().set(new RedisKeys(prefix).lease(sessionId), 'inst-a|1', 'PX', 10_000);

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.quit()));
    await deletePrefix(prefix);
  });

  it('pushes from two instances keep one order, and a drain takes them all in it', async () => {
    const a = new PendingInputs(client(), prefix);
    const b = new PendingInputs(client(), prefix);
    const pushes: Promise<unknown>[] = [];
    const order: string[] = [];
    for (let i = 0; i < 50; i++) {
      const id = `in-${i}`;
      // Each push resolves once Redis ran it: resolution order is Redis's order per client.
      pushes.push((i % 2 ? a : b).push(input('s', id, i % 2 ? 'inst-a' : 'inst-b')));
      order.push(id);
    }
    const lengths = (await Promise.all(pushes)) as Array<{ length: number }>;
    expect(lengths.map((l) => l.length).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 50 }, (_, i) => i + 1),
    );

    await hold('s');
    const drained = await a.drain('s', HOLDER);
    expect(drained).toHaveLength(50);
    expect(new Set(drained.map((d) => d.message.id))).toEqual(new Set(order));
    // Per instance, its own pushes stay in the order it made them.
    for (const origin of ['inst-a', 'inst-b']) {
      const mine = drained.filter((d) => d.origin === origin).map((d) => d.message.id);
      expect(mine).toEqual(order.filter((id) => mine.includes(id)));
    }
    expect(await a.drain('s', HOLDER)).toEqual([]);
    expect(await a.length('s')).toBe(0);
  });

  it('concurrent drains never hand out one input twice', async () => {
    const pusher = new PendingInputs(client(), prefix);
    const drainers = [new PendingInputs(client(), prefix), new PendingInputs(client(), prefix)];
    const taken: string[] = [];
    await hold('s');
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 5 }, (_, i) => pusher.push(input('s', `r${round}-${i}`))),
      );
      const got = await Promise.all(drainers.map((d) => d.drain('s', HOLDER)));
      taken.push(...got.flat().map((g) => g.message.id));
    }
    expect(taken).toHaveLength(100);
    expect(new Set(taken).size).toBe(100);
  });

  it("only the session's holder drains its list: a lease run out, or another grant's, takes nothing", async () => {
    const redis = client();
    const pending = new PendingInputs(redis, prefix);
    await pending.push(input('s', 'in-1'));
    await pending.push(input('s', 'in-2'));
    // Nobody holds it (a holder paused past its lease, not told yet): nothing is taken.
    expect(await pending.drain('s', HOLDER)).toEqual([]);
    // Held by the next grant of the same instance, or by another instance: the old grant takes none.
    const lease = new RedisKeys(prefix).lease('s');
    await redis.set(lease, 'inst-a|2', 'PX', 10_000);
    expect(await pending.drain('s', HOLDER)).toEqual([]);
    await redis.set(lease, 'inst-b|1', 'PX', 10_000);
    expect(await pending.drain('s', HOLDER)).toEqual([]);
    expect(await pending.length('s')).toBe(2);
    // The holder takes them all, in order.
    const drained = await pending.drain('s', { instanceId: 'inst-b', fence: 1 });
    expect(drained.map((d) => d.message.id)).toEqual(['in-1', 'in-2']);
  });

  it('a push says which instance holds the session, in the same round trip', async () => {
    const redis = client();
    const pending = new PendingInputs(redis, prefix);
    expect(await pending.push(input('s', 'in-1'))).toEqual({ length: 1, poked: false });
    await redis.set(new RedisKeys(prefix).lease('s'), 'host|with|bars:4242|7', 'PX', 10_000);
    expect(await pending.push(input('s', 'in-2'))).toEqual({
      holder: 'host|with|bars:4242',
      length: 2,
      poked: false,
    });
  });

  it("with a letter, a push posts it to the holder's mailbox in the same round trip, unless the pusher holds the session or nobody does", async () => {
    const redis = client();
    const keys = new RedisKeys(prefix);
    const pending = new PendingInputs(redis, prefix);
    const mailbox = new InstanceMailbox(redis, { prefix, instanceId: 'inst-a', maxLen: 50 });
    const letter = mailbox.letter('poke', { sessionId: 's' });
    expect(await pending.push(input('s', 'in-1'), letter)).toEqual({ length: 1, poked: false });
    await redis.set(keys.lease('s'), 'inst-a|3', 'PX', 10_000);
    expect(await pending.push(input('s', 'in-2'), letter)).toEqual({
      holder: 'inst-a',
      length: 2,
      poked: false,
    });
    await redis.set(keys.lease('s'), 'host|b|4', 'PX', 10_000);
    expect(await pending.push(input('s', 'in-3'), letter)).toEqual({
      holder: 'host|b',
      length: 3,
      poked: true,
    });
    const entries = await redis.xrange(keys.mailbox('host|b'), '-', '+');
    expect(entries.map(([id, fields]) => decodeEntry(id, fields))).toEqual([
      { id: entries[0][0], from: 'inst-a', type: 'poke', body: { sessionId: 's' } },
    ]);
    expect(await redis.pttl(keys.mailbox('host|b'))).toBeGreaterThan(0);
    expect(await redis.exists(keys.mailbox('inst-a'))).toBe(0);
  });

  it('lists the sessions with inputs on their way, glob characters and all, under its prefix only', async () => {
    const pending = new PendingInputs(client(), prefix);
    const neighbour = new PendingInputs(client(), `${prefix}x`);
    for (const id of ['plain', 's*1', 's[x]?', 'a\\b']) await pending.push(input(id, `in-${id}`));
    await neighbour.push(input('other', 'in-other'));
    expect((await pending.sessions()).sort()).toEqual(['a\\b', 'plain', 's*1', 's[x]?']);
    await hold('plain');
    await pending.drain('plain', HOLDER);
    expect(await pending.sessions()).not.toContain('plain');
    await deletePrefix(`${prefix}x`);
  });

  it('a message round-trips whole, and the list expires if nobody takes it up', async () => {
    const redis = client();
    const pending = new PendingInputs(redis, prefix);
    const message = {
      id: 'in-1',
      sessionId: 's:with:colons',
      content: 'quotes " and \\ newlines\n and ünïcödé 🚀',
      metadata: { nested: { list: [1, 'two', null] } },
    };
    await pending.push({ message, origin: 'inst-a' });
    const ttl = await redis.pttl(new RedisKeys(prefix).pending('s:with:colons'));
    expect(ttl).toBeGreaterThan(23 * 60 * 60 * 1000);
    await hold('s:with:colons');
    expect(await pending.drain('s:with:colons', HOLDER)).toEqual([{ message, origin: 'inst-a' }]);
  });
});

describeRedis('distribution: the wake queue', () => {
  let prefix: string;
  let queue: Queue<WakeJob>;
  let worker: Worker<WakeJob> | undefined;
  const connection = redisConnection;

  beforeEach(() => {
    prefix = testPrefix();
    queue = new Queue<WakeJob>(WAKE_QUEUE, { connection: connection(), prefix });
  });

  afterEach(async () => {
    await worker?.close();
    worker = undefined;
    await queue.close();
    await deletePrefix(prefix);
  });

  /** A worker that records each job it runs and holds the first of each session open. */
  function startWorker(hold: Map<string, Deferred<void>>, ran: string[]) {
    worker = new Worker<WakeJob>(
      WAKE_QUEUE,
      async (job: Job<WakeJob>) => {
        ran.push(job.data.sessionId);
        const gate = hold.get(job.data.sessionId);
        if (gate) {
          hold.delete(job.data.sessionId);
          await gate.promise;
        }
      },
      { connection: connection(), prefix, concurrency: 4 },
    );
    return worker;
  }

  it('wakes of a session that wait are one job; wakes while it runs make exactly one more', async () => {
    const wake = new WakeQueue(queue);
    // Waiting: no worker yet, so every wake finds the first one waiting.
    await Promise.all(Array.from({ length: 10 }, () => wake.wake('s')));
    expect(await queue.getJobCounts('waiting', 'active', 'delayed')).toEqual({
      waiting: 1,
      active: 0,
      delayed: 0,
    });

    const gate = new Deferred<void>();
    const ran: string[] = [];
    const started = new Deferred<void>();
    const w = startWorker(new Map([['s', gate]]), ran);
    w.on('active', () => started.resolve());
    await started.promise;
    // Active: the wakes that come now are kept as one job to follow.
    await Promise.all(Array.from({ length: 10 }, () => wake.wake('s')));
    const drained = new Deferred<void>();
    w.on('drained', () => drained.resolve());
    gate.resolve();
    await drained.promise;
    // Drained fires when the queue is empty: the follow-up ran too.
    await waitFor(async () => ran.length === 2);
    expect(ran).toEqual(['s', 's']);
    expect(await queue.getJobCounts('waiting', 'active', 'completed', 'failed')).toEqual({
      waiting: 0,
      active: 0,
      completed: 0,
      failed: 0,
    });
  });

  it('sessions are woken independently: one job each', async () => {
    const wake = new WakeQueue(queue);
    for (const id of ['a', 'b', 'c', 'a', 'b', 'a']) await wake.wake(id);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(3);
    const ran: string[] = [];
    startWorker(new Map(), ran);
    await waitFor(async () => ran.length === 3);
    expect(ran.sort()).toEqual(['a', 'b', 'c']);
  });
});

/** Polls `done` (each poll a round trip to Redis or a look at recorded jobs) for up to 5 s. */
async function waitFor(done: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + 5_000;
  while (!(await done())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describeRedis('distribution: the instance registry', () => {
  let prefix: string;
  const clients: Redis[] = [];

  beforeEach(() => {
    prefix = testPrefix();
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.quit()));
    await deletePrefix(prefix);
  });

  it('lists the instances heard of lately, forgets one gone silent, and one that stopped', async () => {
    let now = 1_000_000;
    const registry = (instanceId: string) => {
      const redis = testRedis();
      clients.push(redis);
      return new InstanceRegistry(redis, {
        prefix,
        instanceId,
        beatEveryMs: 60_000,
        goneAfterMs: 1_000,
        now: () => now,
      });
    };
    const a = registry('inst-a');
    const b = registry('inst-b');
    const c = registry('inst-c');
    await Promise.all([a.start(), b.start(), c.start()]);
    expect(await a.live()).toEqual(['inst-a', 'inst-b', 'inst-c']);

    await c.stop();
    expect(await a.live()).toEqual(['inst-a', 'inst-b']);

    now += 1_500;
    await a.beat();
    expect(await a.live()).toEqual(['inst-a']);
    // Gone means removed: a late beat brings it back.
    await b.beat();
    expect(await a.live()).toEqual(['inst-a', 'inst-b']);
    await Promise.all([a.stop(), b.stop()]);
  });
});
