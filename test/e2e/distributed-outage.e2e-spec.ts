import { AgentService, HistoryStore, InputInbox, type InputInbox as Inbox } from '../../src';
import type { Message } from '../../src';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { ApiApp } from '../support/api-app';
import { describeOwnRedis, rawCommand, RedisInstance } from '../support/redis-instance';

jest.setTimeout(60_000);

/** Polls `check` every 100 ms until it holds; fails after `ms` naming `what`. */
async function until(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The texts of a session's stored history, in order. */
const textsOf = (messages: Message[]) => messages.map((m) => `${m.role}:${m.content}`);

/**
 * Redis trouble in distributed mode: one server application (`AppModule` with `REDIS_URL`) on a
 * Redis of the test's own (`appendonly yes`, so its data survives a restart) and a temp
 * PostgreSQL schema. While Redis is away `/health` is 503 and inputs and control calls fail at
 * once with "Redis is unreachable"; when it is back the instance carries on by itself.
 */
describeOwnRedis('distributed mode: Redis outage', () => {
  describePg('on PostgreSQL', () => {
    let model: FakeOpenAiServer;
    let redis: RedisInstance;
    let db: TempDb;
    let a: ApiApp;

    /** Its own Redis (`args`), a temp schema and the server application on them. */
    async function setUp(args: string[], env: Record<string, string> = {}): Promise<void> {
      model = await FakeOpenAiServer.start();
      redis = await RedisInstance.create({ args });
      db = await tempPgSchema();
      a = await ApiApp.start({
        server: model,
        env: {
          REDIS_URL: redis.url,
          AGENT_DB: db.url,
          AGENT_INSTANCE_ID: 'outage-a',
          AGENT_QUEUE_PREFIX: 'outage',
          AGENT_LEASE_MS: '6000',
          ...env,
        },
      });
    }

    afterEach(async () => {
      model.release();
      // Closing needs Redis (the worker, the leases): bring it back if a test left it stopped.
      if (!redis.running) await redis.start();
      redis.thaw();
      await a?.close();
      await model.close();
      await redis.remove();
      await db.drop();
    });

    const agent = () => a.app.get(AgentService);
    const inbox = () => a.app.get<symbol, Inbox>(InputInbox, { strict: false });
    const history = () => a.app.get<symbol, HistoryStore>(HistoryStore, { strict: false });
    const health = () => a.http().get('/health');
    const post = (body: object, wait = true) =>
      a
        .http()
        .post(`/agent/messages${wait ? '?wait=true' : ''}`)
        .set(a.auth)
        .send(body);

    /** Runs `work` and resolves with its result and how long it took (ms). */
    async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
      const started = Date.now();
      const value = await work();
      return { value, ms: Date.now() - started };
    }

    describe('a Redis that keeps its data (appendonly yes)', () => {
      beforeEach(() => setUp(['--appendonly', 'yes']));

      it('/health names the instance and is up while Redis is reachable', async () => {
        const res = await health();

        expect(res.status).toBe(200);
        expect(res.body.info.queue).toMatchObject({
          status: 'up',
          mode: 'distributed',
          instanceId: 'outage-a',
          redis: 'reachable',
          worker: 'running',
          connections: { commands: 'ready', 'mailbox reader': 'ready' },
        });
      });

      it('Redis stopped: /health 503, inputs and control calls fail at once with a clear error, nothing is left unsettled; back: all works again', async () => {
        model.enqueue({ text: 'R1' }, { text: 'R2' });
        expect((await post({ sessionId: 's', content: 'H1' })).body).toMatchObject({ reply: 'R1' });
        // The reply comes before its holder lets the session go; while it holds it, an abort is
        // answered here without Redis. This test is about a session nobody holds.
        await until('the session is let go', async () => {
          return (await rawCommand(redis.port, ['EXISTS', 'outage:lease:s'])) === ':0';
        });

        await redis.stop();
        await until('/health answers 503', async () => (await health()).status === 503, 5000);
        const down = await health();
        expect(down.body.error.queue).toMatchObject({
          status: 'down',
          mode: 'distributed',
          instanceId: 'outage-a',
          redis: 'unreachable',
          message: expect.stringMatching(/^Redis is unreachable/),
        });
        expect(down.body.info.store).toMatchObject({ status: 'up' }); // PostgreSQL is fine

        // REST, with and without wait: 503 with Retry-After, the reason in plain words, at once.
        for (const wait of [true, false]) {
          const { value: res, ms } = await timed(() =>
            post({ sessionId: 's', content: 'x' }, wait),
          );
          expect(res.status).toBe(503);
          expect(res.headers['retry-after']).toBe('5');
          expect(res.body).toEqual({
            statusCode: 503,
            error: 'Service Unavailable',
            message: 'Redis is unreachable: the input was not accepted',
          });
          expect(ms).toBeLessThan(3000);
        }

        // The socket `message` event: the same answer in its ack.
        const socket = await a.connect();
        const ack = await socket
          .timeout(5000)
          .emitWithAck('message', { sessionId: 's', content: 'y' });
        expect(ack).toMatchObject({
          statusCode: 503,
          message: 'Redis is unreachable: the input was not accepted',
          retryAfter: 5,
        });

        // The library call: recorded in the inbox first, then settled as dropped (never dangling).
        const { value: settlement, ms } = await timed(() =>
          agent().handleMessage({ id: 'lib-1', sessionId: 's', content: 'z' }),
        );
        expect(settlement).toEqual({ settled: 'dropped', reason: 'store-unavailable' });
        expect(ms).toBeLessThan(3000);
        await until('the inbox records its settlement', async () => {
          return (await inbox().get('lib-1'))?.settlement !== undefined;
        });
        expect((await inbox().get('lib-1'))?.settlement).toEqual(settlement);

        // Control calls: 503 at once, never a hang.
        for (const call of [
          () => a.http().post('/agent/sessions/s/abort').set(a.auth).send({}),
          () =>
            a
              .http()
              .post('/agent/sessions/clear')
              .set(a.auth)
              .send({ sessionIds: ['s'] }),
          () => a.http().delete('/agent/sessions/s').set(a.auth),
        ]) {
          const { value: res, ms: took } = await timed(call);
          expect(res.status).toBe(503);
          expect(res.body.message).toMatch(/^Redis is unreachable: /);
          expect(took).toBeLessThan(3000);
        }
        await until('every input is settled in the inbox', async () => {
          return (await inbox().unsettled()).length === 0;
        });

        await redis.start();
        await until('/health answers 200', async () => (await health()).status === 200);
        const res = await post({ sessionId: 's', content: 'H2' });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ settled: 'turn', reply: 'R2' });
        expect(textsOf(await history().history('s'))).toEqual([
          'user:H1',
          'assistant:R1',
          'user:H2',
          'assistant:R2',
        ]);
      });

      it('Redis hung (SIGSTOP): /health 503 within a few seconds, new inputs fail fast; thawed, all works again', async () => {
        redis.freeze(); // connections stay open, nothing answers: only the PING sees it
        const frozenAt = Date.now();
        await until('/health answers 503', async () => (await health()).status === 503, 6000);
        expect(Date.now() - frozenAt).toBeLessThan(5000);
        expect((await health()).body.error.queue.message).toMatch(/PING timed out after 1000 ms/);

        const { value: res, ms } = await timed(() => post({ sessionId: 'h', content: 'x' }));
        expect(res.status).toBe(503);
        expect(res.body.message).toBe('Redis is unreachable: the input was not accepted');
        expect(ms).toBeLessThan(3000);

        redis.thaw();
        await until('/health answers 200', async () => (await health()).status === 200);
        model.enqueue({ text: 'R1' });
        expect((await post({ sessionId: 'h', content: 'H1' })).body).toMatchObject({ reply: 'R1' });
      });

      it('Redis restarted mid-run: the running turn and the waiting input settle once each, history is right, new inputs work', async () => {
        model.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R3' });
        const held = a.nextModelCall();
        const firstDone = post({ sessionId: 's', content: 'H1' }).then((r) => r);
        await held;
        const secondDone = post({ sessionId: 's', content: 'H2' }).then((r) => r);
        await until('H2 waits behind the running turn', async () => {
          const res = await a.http().get('/agent/sessions/s/queue').set(a.auth);
          return res.status === 200 && res.body.waiting?.length === 1;
        });

        await redis.stop();
        await until('/health answers 503', async () => (await health()).status === 503, 5000);
        // S3: the instance that holds the session answers an abort itself, Redis or not.
        const stale = await a
          .http()
          .post('/agent/sessions/s/abort')
          .set(a.auth)
          .send({ turnId: 'not-the-running-turn' });
        expect(stale.status).toBe(200);
        expect(stale.body).toEqual({ stopped: false });
        model.release(); // the turn ends while Redis is away; H2 runs next, here
        const [r1, r2] = await Promise.all([firstDone, secondDone]);
        expect(r1.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
        expect(r2.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });

        await redis.start();
        await until('/health answers 200', async () => (await health()).status === 200);
        const r3 = await post({ sessionId: 's', content: 'H3' });
        expect(r3.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R3' });

        expect(textsOf(await history().history('s'))).toEqual([
          'user:H1',
          'assistant:R1',
          'user:H2',
          'assistant:R2',
          'user:H3',
          'assistant:R3',
        ]);
        await until('every input is settled in the inbox', async () => {
          return (await inbox().unsettled()).length === 0;
        });
        expect(model.requests).toHaveLength(3); // no turn ran twice
      });
    });

    describe('two instances, a lease of 2 s', () => {
      beforeEach(() => setUp(['--appendonly', 'yes'], { AGENT_LEASE_MS: '2000' }));

      it('S1: an input whose caller waits on the other instance settles there although the settlement could not be sent during the outage', async () => {
        const b = await ApiApp.start({
          server: model,
          env: {
            REDIS_URL: redis.url,
            AGENT_DB: db.url,
            AGENT_INSTANCE_ID: 'outage-b',
            AGENT_QUEUE_PREFIX: 'outage',
            AGENT_LEASE_MS: '2000',
          },
        });
        try {
          model.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
          const held = a.nextModelCall();
          const first = post({ sessionId: 's', content: 'H1' }).then((r) => r);
          await held;
          const view = await a.http().get('/agent/sessions/s').set(a.auth);
          const [holder, other] = view.body.holder === 'outage-a' ? [a, b] : [b, a];
          const second = other
            .http()
            .post('/agent/messages?wait=true')
            .set(other.auth)
            .send({ sessionId: 's', content: 'H2' })
            .then((r) => r);
          await until("H2 waits in the holder's lane", async () => {
            const res = await holder.http().get('/agent/sessions/s/queue').set(holder.auth);
            return res.body.waiting?.length === 1;
          });

          await redis.stop();
          await until('/health answers 503', async () => (await health()).status === 503, 5000);
          model.release(); // both turns run on the holder; H2's settlement cannot be sent to other
          await until('H2 is settled in the inbox', async () => {
            const entries = await inbox().unsettled('s');
            return entries.length === 0;
          });
          await redis.start();

          const [r1, r2] = await Promise.all([first, second]);
          expect(r1.body).toMatchObject({ settled: 'turn', reply: 'R1' });
          expect(r2.body).toMatchObject({ settled: 'turn', reply: 'R2' });
          expect(textsOf(await history().history('s'))).toEqual([
            'user:H1',
            'assistant:R1',
            'user:H2',
            'assistant:R2',
          ]);
        } finally {
          await b.close();
        }
      });

      it('S1: an outage longer than a lease: the lease counts as lost, yet the running turn and the waiting input settle once each and the session runs again', async () => {
        model.enqueue({ text: 'R1', hold: true }, { text: 'R2' }, { text: 'R3' });
        const held = a.nextModelCall();
        const first = post({ sessionId: 's', content: 'H1' }).then((r) => r);
        await held;
        const second = post({ sessionId: 's', content: 'H2' }).then((r) => r);
        await until('H2 waits behind the running turn', async () => {
          const res = await a.http().get('/agent/sessions/s/queue').set(a.auth);
          return res.body.waiting?.length === 1;
        });
        const view = await a.http().get('/agent/sessions/s').set(a.auth);
        expect(view.body.holder).toBe('outage-a');

        await redis.stop();
        // Not renewed for a whole lease: this instance counts it lost and lets the session go.
        await until('the lease is lost', async () => {
          const res = await a.http().get('/agent/sessions/s').set(a.auth);
          return res.status === 200 && res.body.holder === undefined;
        });
        model.release(); // both turns run, still here; their settlements wait for Redis (below)
        await until('H1 and H2 are settled in the inbox', async () => {
          return (await inbox().unsettled('s')).length === 0;
        });
        await redis.start();
        // The lease was lost: the settlements are not routed, the callers find them in the inbox.
        const [r1, r2] = await Promise.all([first, second]);
        expect(r1.body).toMatchObject({ settled: 'turn', reply: 'R1' });
        expect(r2.body).toMatchObject({ settled: 'turn', reply: 'R2' });

        await until('/health answers 200', async () => (await health()).status === 200);
        const r3 = await post({ sessionId: 's', content: 'H3' });
        expect(r3.body).toMatchObject({ settled: 'turn', reply: 'R3' });
        expect(textsOf(await history().history('s'))).toEqual([
          'user:H1',
          'assistant:R1',
          'user:H2',
          'assistant:R2',
          'user:H3',
          'assistant:R3',
        ]);
        await until('every input is settled in the inbox', async () => {
          return (await inbox().unsettled()).length === 0;
        });
        expect(model.requests).toHaveLength(3);
      });
    });

    describe('a Redis that comes back empty (no persistence)', () => {
      // One session at a time: a second session's wake job waits behind the first.
      beforeEach(() => setUp([], { AGENT_LEASE_MS: '2000', AGENT_CONCURRENCY: '1' }));

      it('S1: inputs in the inbox that no pending list carries any more are woken when Redis is back, and settle', async () => {
        model.enqueue({ text: 'RX', hold: true }, { text: 'RY' });
        const held = a.nextModelCall();
        const x = agent().handleMessage({ id: 'x-1', sessionId: 'x', content: 'HX' });
        await held;
        // Y is accepted and on its pending list; its wake job waits for the only worker slot.
        const y = agent().handleMessage({ id: 'y-1', sessionId: 'y', content: 'HY' });
        await until('HY is on its pending list', async () => {
          return (await rawCommand(redis.port, ['LLEN', 'outage:pending:y'])) === ':1';
        });

        await redis.stop();
        await redis.start(); // empty: the pending list, the wake job and the leases are gone
        await until('/health answers 200', async () => (await health()).status === 200);
        model.release(); // X's turn ends; the slot is free for the wake of Y

        await expect(y).resolves.toMatchObject({
          settled: 'turn',
          outcome: 'replied',
          reply: 'RY',
        });
        await expect(x).resolves.toMatchObject({
          settled: 'turn',
          outcome: 'replied',
          reply: 'RX',
        });
        expect(textsOf(await history().history('y'))).toEqual(['user:HY', 'assistant:RY']);
        await until('every input is settled in the inbox', async () => {
          return (await inbox().unsettled()).length === 0;
        });
        expect(model.requests).toHaveLength(2);
      });
    });
  });
});
