import { Queue, Worker } from 'bullmq';
import type Redis from 'ioredis';
import {
  createSqlStores,
  SessionLanesFactory,
  WorkDispatcher,
  type SessionLanesFactory as LanesFactory,
  type Settlement,
  type SqlStores,
} from '../../src';
import { DistributedDispatcher } from '../../src/distribution/redis/distributed.dispatcher';
import { InstanceMailbox } from '../../src/distribution/redis/instance-mailbox';
import { InstanceRegistry } from '../../src/distribution/redis/instance-registry';
import { LeaseFencing } from '../../src/distribution/redis/lease-fencing';
import { PendingInputs } from '../../src/distribution/redis/pending-inputs';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { RemoteView } from '../../src/distribution/redis/remote-view';
import { SessionLeases } from '../../src/distribution/redis/session-leases';
import { WAKE_QUEUE, WakeQueue, type WakeJob } from '../../src/distribution/redis/wake-queue';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { AgentHarness } from '../support/agent-harness';
import { Deferred } from '../support/deferred';
import {
  deletePrefix,
  describeRedis,
  redisConnection,
  testPrefix,
  testRedis,
} from '../support/redis-test';

/**
 * Two instances of the agent in one process, each with its own Redis clients, PostgreSQL pool,
 * mailbox, leases and BullMQ worker, sharing one Redis prefix and one database: the distributed
 * dispatcher runs a session's lane on the instance holding its lease, whichever instance took
 * its inputs, and brings every settlement back to where its caller waits.
 */

/** One instance: the harness (AgentModule), its dispatcher, its worker and what it opened. */
interface Instance {
  id: string;
  harness: AgentHarness;
  dispatcher: DistributedDispatcher;
  leases: SessionLeases;
  stores: SqlStores;
  /** Wake jobs this instance's worker ran. */
  jobs: string[];
  close(): Promise<void>;
  /** Stops without releasing anything it placed (as a killed process would): no release is sent. */
  vanish(): Promise<void>;
}

const human = (sessionId: string, content: string) => ({ sessionId, content });

describeRedis('distributed dispatch (two instances)', () => {
  describePg('on PostgreSQL', () => {
    let prefix: string;
    let db: TempDb;
    let server: FakeOpenAiServer;
    const instances: Instance[] = [];
    let redis: Redis;
    beforeAll(() => (redis = testRedis()));
    afterAll(() => redis.quit());

    async function instance(
      id: string,
      runWhereReceived = true,
      shutdownTimeoutMs?: number,
    ): Promise<Instance> {
      const redis: Redis = testRedis();
      let dispatcher: DistributedDispatcher | undefined;
      const leases = new SessionLeases(redis, {
        prefix,
        instanceId: id,
        leaseMs: 5_000,
        onLost: (grant) => dispatcher?.leaseLost(grant),
      });
      const fencing = new LeaseFencing(leases);
      const stores: SqlStores = await createSqlStores(db.url, { fencing });
      const mailbox = new InstanceMailbox(redis, { prefix, instanceId: id, blockMs: 1_000 });
      const queue = new Queue<WakeJob>(WAKE_QUEUE, { connection: redisConnection(), prefix });
      const parts = {
        instanceId: id,
        leases,
        fencing,
        fences: stores.fences,
        pending: new PendingInputs(redis, prefix),
        wake: new WakeQueue(queue),
        mailbox,
        registry: new InstanceRegistry(redis, {
          prefix,
          instanceId: id,
          beatEveryMs: 100,
          goneAfterMs: 500,
        }),
        requestTimeoutMs: 5_000,
        leaseMs: 5_000,
        concurrency: 64,
        runWhereReceived,
        inbox: stores.inbox,
        remote: new RemoteView(redis, { prefix, instanceId: id }),
      };
      const harness = await AgentHarness.start({
        server,
        agent: {
          ...(shutdownTimeoutMs === undefined ? {} : { shutdownTimeoutMs }),
          sessionStore: stores.sessions,
          historyStore: stores.log,
          messageArchive: stores.log,
          inputInbox: stores.inbox,
        },
        extraProviders: [
          {
            provide: WorkDispatcher,
            useFactory: (lanes: LanesFactory) =>
              (dispatcher = new DistributedDispatcher(lanes, parts)),
            inject: [SessionLanesFactory],
          },
        ],
      });
      await dispatcher!.start();
      const jobs: string[] = [];
      const worker = new Worker<WakeJob>(
        WAKE_QUEUE,
        async (job) => {
          jobs.push(job.data.sessionId);
          await dispatcher!.runWake(job.data.sessionId);
        },
        { connection: redisConnection(), prefix, concurrency: 8 },
      );
      let closed = false;
      const made: Instance = {
        id,
        harness,
        dispatcher: dispatcher!,
        leases,
        stores,
        jobs,
        vanish: async () => {
          closed = true;
          await worker.close(true);
          leases.stop();
          await parts.registry.stop();
          await parts.remote.close();
          await mailbox.close();
          await harness.close().catch(() => undefined);
          await queue.close();
          await stores.close();
          await redis.quit();
        },
        close: async () => {
          if (closed) return;
          await worker.close();
          await harness.close();
          await dispatcher!.close();
          await queue.close();
          await stores.close();
          await redis.quit();
        },
      };
      instances.push(made);
      return made;
    }

    /** The instance where the session's turn `turnId` started. */
    function ranOn(turnId: string): string[] {
      return instances
        .filter((i) => i.harness.of('agent:turn:start').some((e) => e.turnId === turnId))
        .map((i) => i.id);
    }

    /** Resolves once a turn of the session started on any instance, with its id. */
    function turnStart(sessionId: string, content: string): Promise<string> {
      return Promise.race(
        instances.map((i) =>
          i.harness
            .waitFor(
              'agent:turn:start',
              (e) => e.sessionId === sessionId && e.inputs.some((m) => m.content === content),
            )
            .then((e) => e.turnId),
        ),
      );
    }

    /**
     * A turn of session `s` running (its model call held) on whichever instance took it, with one
     * more input waiting there: the holder, the other instance, both settlements and the turn id.
     */
    async function runningWithOneWaiting(a: Instance, b: Instance) {
      server.enqueue({ text: 'R1', hold: true });
      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await server.nextRequest();
      const holder = instances.find((i) => ranOn(t1).includes(i.id))!;
      const other = holder === a ? b : a;
      const waiting = holder.harness.agent.handleMessage(human('s', 'H2'));
      await holder.harness.waitFor(
        'agent:queue',
        (q) => q.sessionId === 's' && q.waiting.length === 1,
      );
      return { first, t1, holder, other, waiting };
    }

    /** Resolves once no instance holds the session (its holder let it go, idle). */
    async function letGo(sessionId: string): Promise<void> {
      const until = Date.now() + 5_000;
      while (await instances[0].leases.holder(sessionId)) {
        if (Date.now() > until) throw new Error(`session ${sessionId} is still held`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }

    beforeEach(async () => {
      prefix = testPrefix();
      db = await tempPgSchema();
      server = await FakeOpenAiServer.start();
    });

    afterEach(async () => {
      server.release();
      for (const i of instances.splice(0)) await i.close();
      await server.close();
      await deletePrefix(prefix);
      await db.drop();
    });

    it('S1, S2: inputs sent to either instance run on the one holding the session, and each caller gets its settlement', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });

      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await server.nextRequest();
      // After the turn's last model call began, a human input opens the next turn (S2, I2).
      const second = b.harness.agent.handleMessage(human('s', 'H2'));
      await Promise.race(
        instances.map((i) =>
          i.harness.waitFor('agent:queue', (q) => q.sessionId === 's' && q.waiting.length === 1),
        ),
      );
      server.release();

      const [s1, s2] = await Promise.all([first, second]);
      expect(s1).toEqual({ settled: 'turn', turnId: t1, outcome: 'replied', reply: 'R1' });
      expect(s2).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      const t2 = (s2 as Extract<Settlement, { settled: 'turn' }>).turnId;
      expect(t2).not.toBe(t1);
      // One instance ran both turns: the one that held the session.
      const holder = ranOn(t1);
      expect(holder).toHaveLength(1);
      expect(ranOn(t2)).toEqual(holder);
      expect((await a.harness.stored('s')).map((m) => [m.role, m.content])).toEqual([
        ['user', 'H1'],
        ['assistant', 'R1'],
        ['user', 'H2'],
        ['assistant', 'R2'],
      ]);
    });

    it("each settlement is written to the inbox once (the engine's write), and the holder lets the session go only once it is there", async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1' }, { text: 'R2' });
      const writes: string[] = [];
      const atRelease: Array<string | undefined> = [];
      for (const i of [a, b]) {
        const { inbox } = i.stores;
        const settle = inbox.settle.bind(inbox);
        inbox.settle = (ids, settlement) => {
          writes.push(...ids);
          return settle(ids, settlement);
        };
        const release = i.leases.release.bind(i.leases);
        i.leases.release = async (grant, clean) => {
          const unsettled = await i.stores.inbox.unsettled(grant.sessionId);
          atRelease.push(...unsettled.map((entry) => entry.id));
          return release(grant, clean);
        };
      }

      const replied = { settled: 'turn', outcome: 'replied' };
      expect(await a.harness.agent.handleMessage(human('s', 'H1'))).toMatchObject(replied);
      await letGo('s');
      expect(await b.harness.agent.handleMessage(human('s', 'H2'))).toMatchObject(replied);
      await letGo('s');

      expect(await a.stores.inbox.unsettled()).toEqual([]);
      expect(writes).toHaveLength(2);
      expect(new Set(writes).size).toBe(2);
      expect(atRelease).toEqual([]);
    });

    it('an idle session costs one wake job per idle-to-busy transition; inputs while it is held cost none', async () => {
      // Through wake jobs only: by default the instance an idle session's input came to runs it.
      const a = await instance('inst-a', false);
      const b = await instance('inst-b', false);
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R3' });

      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      await turnStart('s', 'H1');
      await server.nextRequest();
      const more = [
        b.harness.agent.handleMessage(human('s', 'H2')),
        a.harness.agent.handleMessage(human('s', 'H3')),
      ];
      await Promise.race(
        instances.map((i) =>
          i.harness.waitFor('agent:queue', (q) => q.sessionId === 's' && q.waiting.length === 2),
        ),
      );
      server.release();
      const settled = await Promise.all([first, ...more]);
      expect(settled.every((s) => s.settled === 'turn' && s.outcome === 'replied')).toBe(true);
      expect([...a.jobs, ...b.jobs]).toEqual(['s']);

      // Idle again (its holder let it go): the next input is a new transition, with its job.
      await letGo('s');
      await expect(b.harness.agent.handleMessage(human('s', 'H4'))).resolves.toMatchObject({
        settled: 'turn',
        outcome: 'replied',
      });
      expect([...a.jobs, ...b.jobs]).toEqual(['s', 's']);
    });

    it('an idle session is run by the instance its input came to, with no wake job; inputs while it is held go to that instance', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R3' });
      const first = b.harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await server.nextRequest();
      expect(ranOn(t1)).toEqual(['inst-b']);
      expect(await a.leases.holder('s')).toMatchObject({ instanceId: 'inst-b' });
      const joined = a.harness.agent.handleMessage(human('s', 'H2'));
      await b.harness.waitFor('agent:queue', (q) => q.sessionId === 's' && q.waiting.length === 1);
      server.release();
      const settled = await Promise.all([first, joined]);
      expect(settled.map((x) => x.settled === 'turn' && x.outcome)).toEqual(['replied', 'replied']);

      // Idle again: the next input, sent to a, runs on a; no job was ever added.
      await letGo('s');
      const third = await a.harness.agent.handleMessage(human('s', 'H3'));
      expect(third).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R3' });
      expect(ranOn((third as Extract<Settlement, { settled: 'turn' }>).turnId)).toEqual(['inst-a']);
      expect([...a.jobs, ...b.jobs]).toEqual([]);
      await letGo('s');
      expect(await redis.zrange(`${prefix}:direct`, 0, -1)).toEqual([]);
    });

    it('the holder tells its stores the session of an input another instance accepted, not of one it accepted itself', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      const told = jest.spyOn(LeaseFencing.prototype, 'runs');
      try {
        server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
        const first = a.harness.agent.handleMessage({ ...human('s', 'H1'), id: 'in-h1' });
        await turnStart('s', 'H1');
        await server.nextRequest();
        const joined = b.harness.agent.handleMessage({ ...human('s', 'H2'), id: 'in-h2' });
        await a.harness.waitFor(
          'agent:queue',
          (q) => q.sessionId === 's' && q.waiting.length === 1,
        );
        server.release();
        await expect(Promise.all([first, joined])).resolves.toEqual([
          expect.objectContaining({ outcome: 'replied' }),
          expect.objectContaining({ outcome: 'replied' }),
        ]);
        // Only the holder enters inputs, and only H2 came from elsewhere.
        expect(told.mock.calls).toEqual([['in-h2', 's']]);
        await letGo('s'); // once the inbox has both settlements
        expect((await a.stores.inbox.get('in-h2'))?.settlement).toMatchObject({
          outcome: 'replied',
        });
      } finally {
        told.mockRestore();
      }
    });

    it("S2: a holder whose lease ran out takes nothing from the session's list when poked late: those inputs stay for the instance that holds it now", async () => {
      const a = await instance('inst-a');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      await turnStart('s', 'H1');
      await server.nextRequest();
      // As Redis sees it, a was paused past its lease and b took the session over; an input
      // came for b meanwhile. a has not noticed, and reads a poke sent before the takeover.
      const lease = new RedisKeys(prefix).lease('s');
      const fence = a.leases.grantOf('s')!.fence;
      await redis.set(lease, `inst-b|${fence + 1}`, 'PX', 10_000);
      const pending = new PendingInputs(redis, prefix);
      const late = { id: 'in-late', sessionId: 's', content: 'late' };
      await pending.push({ message: late, origin: 'inst-b' });
      await (a.dispatcher as unknown as { held: { poke(id: string): Promise<void> } }).held.poke(
        's',
      );
      expect(await pending.ids('s')).toEqual(['in-late']);
      expect(a.harness.agent.waiting('s')).toEqual([]);
      // Back to a alone (the takeover was staged): its turn ends as it would have.
      await redis.del(lease, new RedisKeys(prefix).pending('s'));
      server.release();
      await expect(first).resolves.toMatchObject({ settled: 'turn', reply: 'R1' });
    });

    it("a holder whose turn's write is refused learns of the loss from the refusal, and passes none of that turn's settlements on", async () => {
      // a's caller waits for a settlement that comes only after a takeover: a closes without it.
      const a = await instance('inst-a', true, 200);
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true });
      let answered: Settlement | undefined;
      const first = a.harness.agent.handleMessage({ ...human('s', 'H1'), id: 'in-h1' });
      void first.then((settlement) => (answered = settlement));
      await turnStart('s', 'H1');
      await server.nextRequest();
      // As Redis and the database see it, a was paused past its lease and b took the session
      // over (the lease and the fence are b's); a has not noticed: its renewal is not due yet.
      const lease = new RedisKeys(prefix).lease('s');
      const fence = a.leases.grantOf('s')!.fence;
      await redis.set(lease, `inst-b|${fence + 1}`, 'PX', 10_000);
      expect(await b.stores.fences.claim('s', fence + 1)).toBe(true);
      // The first settlement a records from now on is H1's: told when its write came back.
      const inbox = a.stores.inbox;
      const settleOf = inbox.settle.bind(inbox);
      const settleTried = new Deferred<void>();
      inbox.settle = (...args) => {
        inbox.settle = settleOf;
        const tried = settleOf(...args);
        void tried.then(
          () => settleTried.resolve(),
          () => settleTried.resolve(),
        );
        return tried;
      };
      server.release(); // a's model answers; the reply's write is refused
      // a's settlement of H1 was tried (and refused) after the turn ended: by then it would have
      // been passed on, had a not learnt of the loss.
      await settleTried.promise;
      expect(a.leases.grantOf('s')).toBeUndefined();
      expect(answered).toBeUndefined();
      // Nor did a record it: H1 is left for the holder that takes the session over (which closes
      // the interrupted turn and settles it, as the SIGSTOP test of the server processes shows).
      expect((await b.stores.inbox.get('in-h1'))?.settlement).toBeUndefined();
    });

    it.each([
      ['fails (the database is away)', () => Promise.reject(new Error('the database is away'))],
      ['finds a newer fence (the grant is stale)', () => Promise.resolve(false)],
    ])(
      'an idle session taken where its input came whose fence claim %s is handed to a wake job, and its input runs once',
      async (_how, failing) => {
        const a = await instance('inst-a');
        await instance('inst-b');
        server.enqueue({ text: 'R1' }, { text: 'R2' });
        await expect(a.harness.agent.handleMessage(human('s', 'H1'))).resolves.toMatchObject({
          reply: 'R1',
        });
        await letGo('s'); // let go cleanly: the next grant drains the list while it claims
        const { fences } = a.stores;
        const claim = fences.claim.bind(fences);
        fences.claim = () => {
          fences.claim = claim;
          return failing();
        };
        await expect(a.harness.agent.handleMessage(human('s', 'H2'))).resolves.toMatchObject({
          settled: 'turn',
          outcome: 'replied',
          reply: 'R2',
        });
        expect(instances.flatMap((i) => i.jobs)).toEqual(['s']);
        expect(server.requests).toHaveLength(2);
        expect((await a.harness.stored('s')).map((m) => m.content)).toEqual([
          'H1',
          'R1',
          'H2',
          'R2',
        ]);
        await letGo('s');
        expect(await redis.zrange(`${prefix}:direct`, 0, -1)).toEqual([]);
      },
    );

    it('S3: an abort from the other instance stops the turn where it runs and answers true; a stale turnId answers false', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true });

      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await server.nextRequest();
      const holder = instances.find((i) => ranOn(t1).includes(i.id))!;
      const other = holder === a ? b : a;

      await expect(other.harness.agent.abortAsync('s', { turnId: 'not-the-turn' })).resolves.toBe(
        false,
      );
      await expect(other.harness.agent.abortAsync('s', { turnId: t1 })).resolves.toBe(true);
      await expect(first).resolves.toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      // Nothing holds the session now: an abort has nothing to stop.
      await expect(other.harness.agent.abortAsync('s')).resolves.toBe(false);
    });

    it("S8: the waiting list of a session held elsewhere is the holder's, in arrival order", async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const first = a.harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await server.nextRequest();
      const holder = instances.find((i) => ranOn(t1).includes(i.id))!;
      const other = holder === a ? b : a;
      const queued = (n: number) =>
        holder.harness.waitFor('agent:queue', (q) => q.sessionId === 's' && q.waiting.length === n);
      const waiting = [other.harness.agent.handleMessage(human('s', 'H2'))];
      await queued(1);
      waiting.push(holder.harness.agent.handleMessage(human('s', 'H3')));
      await queued(2);
      const listed = await other.dispatcher.waiting('s');
      expect(listed.map((m) => m.content)).toEqual(['H2', 'H3']);
      expect(await other.dispatcher.runningTurn('s')).toBe(t1);
      server.release();
      await Promise.all([first, ...waiting]);
      await letGo('s');
      expect(await other.dispatcher.runningTurn('s')).toBeUndefined();
      expect(await other.dispatcher.waiting('s')).toEqual([]);
    });

    it('S4: clearing from the other instance stops the turn where it runs, drops its waiting inputs and clears the history', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      const { first, t1, holder, other, waiting } = await runningWithOneWaiting(a, b);

      await expect(other.harness.agent.clearHistory(['s'])).resolves.toEqual(['s']);
      await expect(first).resolves.toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      await expect(waiting).resolves.toEqual({ settled: 'dropped', reason: 'cleared' });
      expect(await a.harness.stored('s')).toEqual([]);

      // Released everywhere: the next input, on either instance, runs.
      server.enqueue({ text: 'R3' });
      await expect(holder.harness.agent.handleMessage(human('s', 'H3'))).resolves.toMatchObject({
        settled: 'turn',
        outcome: 'replied',
        reply: 'R3',
      });
      expect((await b.harness.stored('s')).map((m) => m.content)).toEqual(['H3', 'R3']);
    });

    it('S4: an input sent to another instance while a clearing holds the session waits and runs after it', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      const inClear = new Deferred<void>();
      const endClear = new Deferred<void>();
      const clearing = a.harness.agent.clearing(['s'], async () => {
        inClear.resolve();
        await endClear.promise;
      });
      // The clear runs: the session is held on every instance.
      await inClear.promise;
      expect(b.dispatcher.view.isHeld('s')).toBe(true);
      const held = b.harness.agent.handleMessage(human('s', 'H1'));
      // Accepted (durable in the inbox), yet held: nothing on its way, no turn, no model call.
      await waitUntilAsync(async () => (await b.stores.inbox.unsettled('s')).length === 1);
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(await b.dispatcher.waiting('s')).toEqual([]);
      expect(instances.flatMap((i) => i.harness.of('agent:turn:start'))).toEqual([]);
      expect(server.requests).toHaveLength(0);
      endClear.resolve();
      await clearing;
      await expect(held).resolves.toMatchObject({ settled: 'turn', outcome: 'replied' });
    });

    it('S7: deleting the session from the other instance stops its turn and drops its inputs', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      const { first, t1, holder, other, waiting } = await runningWithOneWaiting(a, b);

      await other.harness.agent.deleteSession('s');
      await expect(first).resolves.toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      // deleteSession holds the session first (as in one process): the hold's stop drops them.
      await expect(waiting).resolves.toEqual({ settled: 'dropped', reason: 'cleared' });
      // The generation moved for every instance: the session starts afresh on either.
      server.enqueue({ text: 'R3' });
      await expect(holder.harness.agent.handleMessage(human('s', 'H3'))).resolves.toMatchObject({
        settled: 'turn',
        outcome: 'replied',
      });
      expect((await other.harness.stored('s')).map((m) => m.content)).toEqual(['H3', 'R3']);
    });

    it('S4: clearing all from one instance stops the sessions running on every instance', async () => {
      const a = await instance('inst-a');
      const b = await instance('inst-b');
      server.enqueue({ text: 'R1', hold: true }, { text: 'R2', hold: true });
      const runs = [
        a.harness.agent.handleMessage(human('s1', 'H1')),
        b.harness.agent.handleMessage(human('s2', 'H2')),
      ];
      await Promise.all([turnStart('s1', 'H1'), turnStart('s2', 'H2')]);
      await server.nextRequest();
      await server.nextRequest();

      await expect(b.harness.agent.clearHistory()).resolves.toBe('all');
      for (const settled of await Promise.all(runs)) {
        expect(settled).toMatchObject({ settled: 'turn', outcome: 'aborted' });
      }
      expect(await a.harness.stored('s1')).toEqual([]);
      expect(await a.harness.stored('s2')).toEqual([]);
    });

    it('S4: a hold of an instance that vanished is forgotten, so its sessions are not held forever', async () => {
      const a = await instance('inst-a');
      const c = await instance('inst-c');
      let never!: () => void;
      void c.harness.agent.clearing(['s'], () => new Promise<void>((resolve) => (never = resolve)));
      await waitUntil(() => a.dispatcher.view.isHeld('s'));
      await c.vanish();
      await waitUntil(() => !a.dispatcher.view.isHeld('s'));
      await expect(a.harness.agent.handleMessage(human('s', 'H1'))).resolves.toMatchObject({
        settled: 'turn',
        outcome: 'replied',
      });
      never();
    });
  });
});

/** Polls a local condition (an instance's own view, no I/O) until it holds, for up to 5 s. */
async function waitUntil(done: () => boolean): Promise<void> {
  const until = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Polls `done` (a store read) every 10 ms for up to 5 s. */
async function waitUntilAsync(done: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + 5_000;
  while (!(await done())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
