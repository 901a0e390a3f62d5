import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiApp } from '../support/api-app';
import { FakeOpenAiServer } from '../../src/testing';
import { ServerProcess } from '../support/api-process';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';

describe('persistence through the server (issue 7)', () => {
  let server: FakeOpenAiServer;
  const file = join(tmpdir(), `agent-restart-${process.pid}.sqlite`);

  beforeAll(async () => {
    server = await FakeOpenAiServer.start();
  });
  afterAll(async () => {
    await server.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
  });

  it('a restarted server on the same AGENT_DB file still has the history (read through REST)', async () => {
    server.enqueue({ text: 'remembered answer' });
    const first = await ApiApp.start({ server, env: { AGENT_DB: file } });
    const answer = await first
      .http()
      .post('/agent/messages?wait=true')
      .set(first.auth)
      .send({ sessionId: 'keep', content: 'remember me' });
    expect(answer.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
    await first.close();

    const second = await ApiApp.start({ server, env: { AGENT_DB: file } });
    try {
      const history = await second.http().get('/agent/sessions/keep/history').set(second.auth);
      expect(history.status).toBe(200);
      expect(history.body.messages.map((m: { content: string }) => m.content)).toEqual([
        'remember me',
        'remembered answer',
      ]);
      expect(history.body.messages[1].metadata.turnRecord).toEqual({ outcome: 'replied' });
    } finally {
      await second.close();
    }
  });

  it('a corrupted AGENT_DB file stops start-up with one line naming AGENT_DB', async () => {
    const corrupt = join(tmpdir(), `agent-corrupt-${process.pid}.sqlite`);
    writeFileSync(
      corrupt,
      'this is not a database, just some text that is long enough '.repeat(20),
    );
    const proc = ServerProcess.start({ AGENT_DB: corrupt });
    const exit = await proc.exited;
    expect(exit.code).not.toBe(0);
    const errors = proc.stderr.split('\n').filter((line) => line.trim());
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`AGENT_DB "${corrupt}" cannot be opened`);
    rmSync(corrupt, { force: true });
  });

  describePg('two server instances on one PostgreSQL database', () => {
    let db: TempDb;
    beforeAll(async () => {
      db = await tempPgSchema();
    });
    afterAll(() => db?.drop());

    it("see each other's writes: a turn through one is in the history read through the other", async () => {
      const a = await ApiApp.start({ server, env: { AGENT_DB: db.url } });
      const b = await ApiApp.start({ server, env: { AGENT_DB: db.url } });
      try {
        server.enqueue({ text: 'shared answer' });
        const answer = await a
          .http()
          .post('/agent/messages?wait=true')
          .set(a.auth)
          .send({ sessionId: 'shared', content: 'written by A' });
        expect(answer.body).toMatchObject({ outcome: 'replied' });
        const history = await b.http().get('/agent/sessions/shared/history').set(b.auth);
        expect(history.body.messages.map((m: { content: string }) => m.content)).toEqual([
          'written by A',
          'shared answer',
        ]);
        // Settings written through one instance are read by the other (S6 on a shared store).
        await a
          .http()
          .put('/agent/sessions/shared/model')
          .set(a.auth)
          .send({ model: 'other-model' })
          .expect(204);
        server.enqueue({ text: 'from B' });
        await b
          .http()
          .post('/agent/messages?wait=true')
          .set(b.auth)
          .send({ sessionId: 'shared', content: 'written by B' });
        expect(server.requests.at(-1).model).toBe('other-model');
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
});
