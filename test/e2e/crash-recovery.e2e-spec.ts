import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { ControlKinds, WellKnownMetadataKeys as K, type Message } from '../../src';
import { ServerProcess } from '../support/api-process';
import { FakeOpenAiServer } from '../../src/testing';

const TOKEN = 'crash-test-token-0123456789abcdef';
const auth = { Authorization: `Bearer ${TOKEN}` };

/** Polls a condition of the server's state (never a fixed sleep): bounded in count and time. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('the server never reached the expected state');
}

/**
 * Nothing accepted is lost (hardening): the server is SIGKILLed with a turn mid-stream and two
 * inputs waiting, then restarted on the same SQLite file. The interrupted turn is closed once
 * (outcome error, its stop marker and record), the waiting inputs run in arrival order, nothing is
 * archived twice, and a repeated delivery of an input id gets its first settlement.
 */
describe('crash recovery (SIGKILL, restart on the same store)', () => {
  const db = join(tmpdir(), `agent-crash-${process.pid}.sqlite`);
  let fake: FakeOpenAiServer;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    fake = await FakeOpenAiServer.start();
  });

  afterAll(async () => {
    for (const server of servers) server.signal('SIGKILL');
    await Promise.all(servers.map((s) => s.exited));
    await fake.close();
    for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(db + suffix, { force: true });
  });

  const start = async () => {
    const server = ServerProcess.start({
      AGENT_DB: db,
      LLM_BASE_URL: fake.url,
      LLM_MODEL: 'test-model',
      AGENT_ADMIN_TOKEN: TOKEN,
    });
    servers.push(server);
    return { server, url: await server.url() };
  };
  const post = (url: string, body: object, wait = false) =>
    request(url)
      .post(`/agent/messages${wait ? '?wait=true' : ''}`)
      .set(auth)
      .send(body);
  const history = async (url: string): Promise<Message[]> =>
    (await request(url).get('/agent/sessions/s/history').set(auth)).body.messages;

  it('S1 / P4 / P5: every accepted input settles once; the interrupted turn is recorded; no archive twice', async () => {
    fake.enqueue({ text: 'a long answer that never finishes', chunks: 4, hold: true });
    const first = await start();
    expect((await post(first.url, { id: 'in-1', sessionId: 's', content: 'hello' })).status).toBe(
      202,
    );
    await fake.nextRequest();
    for (const [id, content] of [
      ['in-2', 'job one'],
      ['in-3', 'job two'],
    ]) {
      const res = await post(first.url, { id, sessionId: 's', content, source: 'job' });
      expect(res.status).toBe(202);
    }
    await until(
      async () => (await request(first.url).get('/agent/sessions/s/queue').set(auth)).body,
      (queue) => queue.waiting?.length === 2,
    );

    first.server.signal('SIGKILL');
    expect(await first.server.exited).toEqual({ code: null, signal: 'SIGKILL' });
    fake.release();
    fake.enqueue({ text: 'answer one' }, { text: 'answer two' });
    const second = await start();
    const [, closed, resumed, ms] = await second.server.waitForOutput(
      /Recovered after a restart: (\d+) interrupted turn\(s\) closed, (\d+) waiting input\(s\) resumed \((\d+) ms\)/,
    );
    expect([closed, resumed]).toEqual(['1', '2']);
    expect(Number(ms)).toBeLessThan(5000);

    const stored = await until(
      () => history(second.url),
      (messages) => messages.filter((m) => m.role === 'assistant').length === 2,
    );
    const turnOf = (m: Message) => m.metadata[K.TurnId];
    const interrupted = turnOf(stored[0]);
    expect(stored.map((m) => [m.kind ?? m.role, m.content])).toEqual([
      ['user', 'hello'],
      [ControlKinds.TurnStopped, expect.stringContaining('interrupted by a restart')],
      [ControlKinds.EventMarker, ''],
      ['user', 'job one'],
      ['assistant', 'answer one'],
      ['user', 'job two'],
      ['assistant', 'answer two'],
    ]);
    expect(stored[2].metadata[K.TurnRecord]).toEqual({
      outcome: 'error',
      error: '[error] The turn was interrupted by a restart.',
    });
    expect([turnOf(stored[1]), turnOf(stored[2])]).toEqual([interrupted, interrupted]);

    // A repeated delivery settles as the first did and archives nothing.
    const again = await post(second.url, { id: 'in-1', sessionId: 's', content: 'hello' }, true);
    expect(again.body).toMatchObject({
      settled: 'turn',
      turnId: interrupted,
      outcome: 'error',
      error: '[error] The turn was interrupted by a restart.',
    });
    const twice = await post(second.url, { id: 'in-2', sessionId: 's', content: 'job one' }, true);
    expect(twice.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'answer one' });
    expect(await history(second.url)).toHaveLength(stored.length);
  }, 60_000);
});
