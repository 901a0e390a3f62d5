import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiApp } from '../support/api-app';
import { FakeOpenAiServer } from '../support/fake-openai-server';
import { ServerProcess } from '../support/api-process';

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
});
