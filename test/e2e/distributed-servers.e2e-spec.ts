import { io } from 'socket.io-client';
import request from 'supertest';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg } from '../contracts/sql-test-db';
import { nextSocketEvent, TEST_TOKEN, type AgentClient } from '../support/api-app';
import { describeRedis } from '../support/redis-test';
import { DistributedServers } from '../support/distributed-servers';

jest.setTimeout(90_000);

/**
 * Two server processes (`src/main.ts`) in distributed mode, as an operator runs them: one Redis,
 * one PostgreSQL database, one key prefix, each its own instance id and port. Inputs sent to
 * either over REST run on the instance holding their session and are answered where they came.
 */
describeRedis('distributed mode: two server processes', () => {
  describePg('on PostgreSQL', () => {
    let model: FakeOpenAiServer;
    const servers = new DistributedServers();
    const clients: AgentClient[] = [];

    const server = (instanceId: string) => servers.start(instanceId);

    const session = (url: string, sessionId: string) =>
      request(url).get(`/agent/sessions/${sessionId}`).set('Authorization', `Bearer ${TEST_TOKEN}`);

    const post = (url: string, sessionId: string, content: string) =>
      request(url)
        .post('/agent/messages?wait=true')
        .set('Authorization', `Bearer ${TEST_TOKEN}`)
        .send({ sessionId, content });

    beforeEach(async () => {
      await servers.setUp();
      model = servers.model;
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) client.disconnect();
      await servers.tearDown();
    });

    it('starts in distributed mode, saying so, and warns of a Redis that keeps nothing on disk', async () => {
      const a = server('inst-a');
      await a.url();
      await a.waitForOutput(/Distributed mode: instance inst-a, lease 2000 ms, 64 sessions/);
      expect(a.stdout + a.stderr).toMatch(/REDIS_URL: Redis keeps nothing on disk \(appendonly no/);
    });

    it('S1, S2: inputs posted to either server run on the one holding the session and are answered where they were posted', async () => {
      const [a, b] = [server('inst-a'), server('inst-b')];
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      model.enqueue({ text: 'R1', hold: true }, { text: 'R2' });

      const first = post(urlA, 's', 'H1').then((r) => r);
      await model.nextRequest();
      const second = post(urlB, 's', 'H2').then((r) => r);
      // H2 waits behind the running turn on whichever server runs the session.
      await waitUntil(async () => {
        for (const url of [urlA, urlB]) {
          const state = await session(url, 's');
          if (state.status === 200 && state.body.waiting === 1) return true;
        }
        return false;
      });
      // Either server names the instance that runs the session.
      await waitUntil(async () => {
        const states = await Promise.all([urlA, urlB].map((url) => session(url, 's')));
        const holders = states.map((state) => state.body.holder as string | undefined);
        return holders[0] !== undefined && holders[0] === holders[1];
      });
      expect(['inst-a', 'inst-b']).toContain((await session(urlB, 's')).body.holder);
      model.release();

      const [r1, r2] = await Promise.all([first, second]);
      expect(r1.status).toBe(200);
      expect(r1.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
      expect(r2.status).toBe(200);
      expect(r2.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      const history = await request(urlA)
        .get('/agent/sessions/s/history')
        .set('Authorization', `Bearer ${TEST_TOKEN}`);
      expect(history.status).toBe(200);
      const messages = history.body.messages as Array<{ content: string }>;
      expect(messages.map((m) => m.content)).toEqual(['H1', 'R1', 'H2', 'R2']);
    });

    it.each([
      ['run where its input came (no wake job: the heartbeat sweep wakes it)', 'true'],
      ['taken by a wake job (BullMQ delivers the stalled job again)', 'false'],
    ])(
      'S1, P4: the holder killed mid-turn with an input waiting, the session %s: the other server takes the session over, closes the turn once and runs the input',
      async (_how, runWhereReceived) => {
        const env = { AGENT_RUN_WHERE_RECEIVED: runWhereReceived };
        const [a, b] = [servers.start('inst-a', env), servers.start('inst-b', env)];
        const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
        model.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
        const first = post(urlA, 's', 'H1').then(
          (r) => r,
          (error: unknown) => error,
        );
        await model.nextRequest();
        // The holder is the instance the session's state names (either server knows it).
        let holderUrl = '';
        await waitUntil(async () => {
          const state = await session(urlA, 's');
          if (state.body.runningTurnId && state.body.holder) {
            holderUrl = state.body.holder === 'inst-a' ? urlA : urlB;
          }
          return holderUrl !== '';
        });
        const [holder, survivor] = holderUrl === urlA ? [a, b] : [b, a];
        // Run where its input came: the holder is the server H1 was posted to.
        if (runWhereReceived === 'true') expect(holder).toBe(a);
        const survivorUrl = holderUrl === urlA ? urlB : urlA;
        const second = post(survivorUrl, 's', 'H2').then((r) => r);
        await waitUntil(async () => (await session(holderUrl, 's')).body.waiting === 1);

        holder.signal('SIGKILL');
        await holder.exited;

        const r2 = await second;
        expect(r2.status).toBe(200);
        expect(r2.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
        if (survivor === a) {
          // H1's caller waited on the survivor: it gets the interrupted turn's outcome.
          const r1 = (await first) as { status: number; body: unknown };
          expect(r1.body).toMatchObject({
            settled: 'turn',
            outcome: 'error',
            error: '[error] The turn was interrupted by a restart.',
          });
        }
        const history = await request(survivorUrl)
          .get('/agent/sessions/s/history')
          .set('Authorization', `Bearer ${TEST_TOKEN}`);
        const messages = history.body.messages as Array<{
          role: string;
          content: string;
          kind?: string;
          metadata: Record<string, unknown>;
        }>;
        const conversation = messages.filter((m) => !m.kind).map((m) => m.content);
        expect(conversation).toEqual(['H1', 'H2', 'R2']);
        // The interrupted turn is closed once: one record of it, outcome error.
        const records = messages.filter(
          (m) => (m.metadata.turnRecord as { outcome?: string } | undefined)?.outcome === 'error',
        );
        expect(records).toHaveLength(1);
        expect(model.requests).toHaveLength(2);
      },
    );

    it('a dashboard connected to either server sees the turns of the session, wherever they run', async () => {
      const [a, b] = [server('inst-a'), server('inst-b')];
      const urls = await Promise.all([a.url(), b.url()]);
      const sockets = await Promise.all(
        urls.map(async (url) => {
          const socket: AgentClient = io(`${url}/agent`, {
            auth: { token: TEST_TOKEN },
            transports: ['websocket'],
            reconnection: false,
          });
          clients.push(socket);
          await new Promise((resolve) => socket.once('connect', () => resolve(undefined)));
          await socket.emitWithAck('subscribe', { sessionId: 's' });
          return socket;
        }),
      );
      const ends = sockets.map((socket) =>
        nextSocketEvent(socket, 'turn', (e) => e.sessionId === 's' && e.phase === 'end'),
      );
      model.enqueue({ text: 'R1' }, { text: 'R2' });
      const r1 = await post(urls[0], 's', 'H1');
      const [endOnA, endOnB] = await Promise.all(ends);
      expect(endOnA).toMatchObject({ turnId: r1.body.turnId, outcome: 'replied' });
      expect(endOnB).toMatchObject({ turnId: r1.body.turnId, outcome: 'replied' });
      // Emitted once by the instance that ran it: each dashboard got it once.
      const again = sockets.map((socket) =>
        nextSocketEvent(socket, 'turn', (e) => e.sessionId === 's' && e.phase === 'end'),
      );
      const r2 = await post(urls[1], 's', 'H2');
      for (const end of await Promise.all(again))
        expect(end).toMatchObject({ turnId: r2.body.turnId });
    });
  });
});

/** Polls `done` (a request to a server) every 20 ms for up to 10 s. */
async function waitUntil(done: () => Promise<boolean>): Promise<void> {
  const until = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
