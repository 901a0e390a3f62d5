import request from 'supertest';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg } from '../contracts/sql-test-db';
import { TEST_TOKEN } from '../support/api-app';
import { waitFor } from '../support/distributed-apps';
import { describeRedis } from '../support/redis-test';
import { DistributedServers } from '../support/distributed-servers';

jest.setTimeout(90_000);

/** A message of the history as the REST API lists it. */
interface Listed {
  role: string;
  content: string;
  kind?: string;
  metadata: Record<string, unknown>;
}

/**
 * Two server processes in distributed mode (`AGENT_LEASE_MS=2000`) and a holder that is paused
 * (SIGSTOP) mid-turn, not killed: the other server takes the session over once the lease ran
 * out; when the paused one resumes, the writes its old turn still makes are refused (fencing),
 * nothing is archived twice, and it goes on serving.
 */
describeRedis('distributed mode: a paused holder (server processes)', () => {
  describePg('on PostgreSQL', () => {
    let model: FakeOpenAiServer;
    const servers = new DistributedServers();

    const server = (instanceId: string) => servers.start(instanceId);

    const auth = (test: request.Test) => test.set('Authorization', `Bearer ${TEST_TOKEN}`);
    const session = (url: string, sessionId: string) =>
      auth(request(url).get(`/agent/sessions/${sessionId}`));
    const post = (url: string, sessionId: string, content: string) =>
      auth(request(url).post('/agent/messages?wait=true')).send({ sessionId, content });
    const history = async (url: string, sessionId: string): Promise<Listed[]> => {
      const res = await auth(request(url).get(`/agent/sessions/${sessionId}/history`));
      expect(res.status).toBe(200);
      return res.body.messages as Listed[];
    };

    /** The server named as the session's holder, once both servers name the same one. */
    async function holderOf(urls: string[], sessionId: string): Promise<string> {
      let holder = '';
      await waitFor(async () => {
        const states = await Promise.all(urls.map((url) => session(url, sessionId)));
        const named = states.map((s) => s.body.holder as string | undefined);
        holder = named[0] ?? '';
        return holder !== '' && named.every((h) => h === holder);
      }, 'a holder both servers name');
      return holder;
    }

    beforeEach(async () => {
      await servers.setUp();
      model = servers.model;
    });

    // Whatever happened, no process stays stopped or running.
    afterEach(() => servers.tearDown());

    it('S1, P4: a holder paused mid-turn with an input waiting is taken over; resumed, it stops its old turn (whose writes are refused) and serves again', async () => {
      const [a, b] = [server('inst-a'), server('inst-b')];
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      model.enqueue({ text: 'R1-late', hold: true }, { text: 'R2' }, { text: 'R3' });
      const first = post(urlA, 's', 'H1').then(
        (r) => r,
        (error: unknown) => error,
      );
      await model.nextRequest();
      const holderId = await holderOf([urlA, urlB], 's');
      const [paused] = holderId === 'inst-a' ? [a, b] : [b, a];
      const [pausedUrl, survivorUrl] = holderId === 'inst-a' ? [urlA, urlB] : [urlB, urlA];
      const second = post(survivorUrl, 's', 'H2').then((r) => r);
      await waitFor(
        async () => (await session(pausedUrl, 's')).body.waiting === 1,
        'H2 waiting on the holder',
      );

      paused.signal('SIGSTOP');
      // The survivor takes the session over once the lease ran out and runs the waiting input.
      const r2 = await second;
      expect(r2.status).toBe(200);
      expect(r2.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      expect(model.requests).toHaveLength(2);
      const before = await history(survivorUrl, 's');
      expect(before.filter((m) => !m.kind).map((m) => m.content)).toEqual(['H1', 'H2', 'R2']);

      // It resumes, its model call still waiting: it finds its lease lost and a newer fence in
      // the database, so it stops its old turn instead of waiting for the model to finish it.
      paused.signal('SIGCONT');
      await paused.waitForOutput(/turn \S+ session "s" ended aborted/);
      expect(paused.stdout + paused.stderr).toMatch(
        /Stopped turn \S+ of session "s": another instance took the session over/,
      );
      // The stopped turn's own closing writes are refused by the store.
      expect(paused.stdout + paused.stderr).toMatch(
        /FencedWriteError: A write of session "s" carried fence \d+, but the store has seen fence \d+/,
      );
      model.release(); // too late for the stopped call: nothing of it is written
      // It serves again: an input posted to it settles (run wherever the session is held).
      const r3 = await post(pausedUrl, 's', 'H3');
      expect(r3.status).toBe(200);
      expect(r3.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R3' });

      const after = await history(survivorUrl, 's');
      // Nothing from the old turn after the takeover, nothing archived twice.
      expect(after.filter((m) => !m.kind).map((m) => m.content)).toEqual([
        'H1',
        'H2',
        'R2',
        'H3',
        'R3',
      ]);
      expect(after.some((m) => m.content.includes('R1-late'))).toBe(false);
      // The interrupted turn was closed once (by the survivor).
      const closed = after.filter(
        (m) => (m.metadata.turnRecord as { outcome?: string } | undefined)?.outcome === 'error',
      );
      expect(closed).toHaveLength(1);
      expect(model.requests).toHaveLength(3);
      // H1's caller (on server A) got an answer that is not the refused reply.
      const r1 = (await first) as { status?: number; body?: { reply?: string } };
      expect(r1.body?.reply).not.toBe('R1-late');
    });

    it('S6 over REST: a model assigned through the server that does not run the session (PUT .../model, PUT .../:id) is the next turn’s; an unserved one is 422', async () => {
      const [a, b] = [server('inst-a'), server('inst-b')];
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      model.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const first = post(urlA, 's', 'H1').then((r) => r);
      await model.nextRequest();
      const holderId = await holderOf([urlA, urlB], 's');
      const otherUrl = holderId === 'inst-a' ? urlB : urlA;

      const assigned = await auth(request(otherUrl).put('/agent/sessions/s/model')).send({
        model: 'other-model',
      });
      expect(assigned.status).toBe(204);
      const refused = await auth(request(otherUrl).put('/agent/sessions/s/model')).send({
        provider: 'nope',
        model: 'x',
      });
      expect(refused.status).toBe(422);
      const second = post(otherUrl, 's', 'H2').then((r) => r);
      await waitFor(
        async () => (await session(otherUrl, 's')).body.waiting === 1,
        'H2 waiting on the holder',
      );
      model.release();
      expect((await first).body).toMatchObject({ reply: 'R1' });
      expect((await second).body).toMatchObject({ reply: 'R2' });
      expect(model.requests.map((r) => r.model)).toEqual(['test-model', 'other-model']);

      // The settings route (PUT /agent/sessions/:id) on the other server: the next turn's model.
      model.enqueue({ text: 'R3' });
      const updated = await auth(request(otherUrl).put('/agent/sessions/s')).send({
        model: { model: 'third-model' },
      });
      expect(updated.status).toBe(200);
      expect(updated.body.settings).toMatchObject({ model: { model: 'third-model' } });
      const third = await post(holderId === 'inst-a' ? urlA : urlB, 's', 'H3');
      expect(third.body).toMatchObject({ reply: 'R3' });
      expect(model.requests.map((r) => r.model)).toEqual([
        'test-model',
        'other-model',
        'third-model',
      ]);
    });
  });
});
