import {
  SessionStore,
  ToolRegistry,
  WellKnownMetadataKeys as K,
  type SessionStore as SessionStorePort,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

describe('session settings (C1), attachments (D1), turn records (I7)', () => {
  let h: AgentHarness;
  let sessions: SessionStorePort;
  afterEach(() => h?.close());

  async function boot(agent = {}) {
    h = await AgentHarness.start({ agent });
    sessions = h.app.get<SessionStorePort>(SessionStore);
    h.app.get(ToolRegistry).register({
      name: 'echo',
      description: 'echo',
      parameters: { type: 'object', properties: {} },
      handler: () => 'echoed',
    });
  }

  it('C1: deep thinking is a per-session setting passed to the model call', async () => {
    await boot({ modelCapabilities: { 'test-model': { reasoning: true } } });
    await h.agent.handleMessage({ sessionId: 's', content: 'plain' });
    await sessions.update('s', { think: true });
    await h.agent.handleMessage({ sessionId: 's', content: 'think hard' });
    await h.agent.handleMessage({ sessionId: 'other', content: 'plain elsewhere' });
    expect(h.server.requests.map((r) => r.reasoning_effort)).toEqual([
      undefined,
      'high',
      undefined,
    ]);
  });

  it('C1: the maximum tool iterations is a per-session setting', async () => {
    await boot({ maxToolIterations: 5 });
    await h.agent.handleMessage({ sessionId: 's', content: 'first' });
    await sessions.update('s', { maxToolIterations: 0 });
    h.server.enqueue({ text: 'no tools for you' });
    await h.agent.handleMessage({ sessionId: 's', content: 'second' });
    expect(h.server.requests[0].tools).toHaveLength(1);
    expect(h.server.requests[1].tools).toBeUndefined();
  });

  it('C1 / U6: the history count limit is a per-session setting', async () => {
    await boot({ historyLimit: 50 });
    for (const content of ['one', 'two']) {
      await h.agent.handleMessage({ sessionId: 's', content });
    }
    await sessions.update('s', { historyLimit: 1 });
    await h.agent.handleMessage({ sessionId: 's', content: 'three' });
    const last = h.server.requests[2].messages.filter((m: any) => m.role !== 'system');
    expect(last.map((m: any) => m.content)).toEqual(['ok', 'three']);
    expect(h.of('token:usage').at(-1)!.historyLimit).toBe(1);
  });

  it('D1: file attachments are not processed without a preprocessor', async () => {
    await boot();
    const file = {
      kind: 'file' as const,
      data: 'data:text/plain;base64,U0VDUkVUIFJFUE9SVA==',
      name: 'r.txt',
    };
    await h.agent.handleMessage({ sessionId: 's', content: 'see attached', attachments: [file] });
    const sent = JSON.stringify(h.server.requests[0].messages);
    expect(sent).not.toContain('SECRET REPORT');
    expect(sent).not.toContain('U0VDUkVUIFJFUE9SVA');
    // The attachment is kept with the archived input, not lost.
    expect((await h.stored('s'))[0].metadata[K.Attachments]).toEqual([file]);
  });

  it('D1: a preprocessor is where file attachments are handled', async () => {
    await boot();
    h.agent.registerPreprocessor('files', async (message, next) => {
      const texts = (message.attachments ?? [])
        .filter((a) => a.kind === 'file')
        .map((a) => Buffer.from(a.data.split(',')[1], 'base64').toString('utf8'));
      await next({
        ...message,
        content: [message.content, ...texts.map((t) => `[file: ${t}]`)].join('\n'),
      });
    });
    const file = {
      kind: 'file' as const,
      data: 'data:text/plain;base64,U0VDUkVUIFJFUE9SVA==',
      name: 'r.txt',
    };
    await h.agent.handleMessage({ sessionId: 's', content: 'see attached', attachments: [file] });
    const user = h.server.requests[0].messages.at(-1);
    expect(user.content).toBe('see attached\n[file: SECRET REPORT]');
  });

  it('I7: a turn record holds outcome, source and error (and who stopped it), never the stop reason', async () => {
    await boot();
    h.server.enqueue({ text: '  ' }, { text: 'held', hold: true });
    await h.agent.handleMessage({ sessionId: 's', content: 'quiet', source: 'cron:nightly' });
    const stopped = h.agent.handleMessage({ sessionId: 's', content: 'stop me' });
    await h.server.nextRequest();
    await h.server.nextRequest();
    h.agent.abort('s', { by: { platform: 'web', userId: 'bob' }, reason: 'too slow for bob' });
    await stopped;
    const records = (await h.stored('s'))
      .map((m) => m.metadata[K.TurnRecord])
      .filter((r) => r !== undefined);
    expect(records).toEqual([
      { outcome: 'silent', source: 'cron:nightly' },
      { outcome: 'aborted', by: { platform: 'web', userId: 'bob' } },
    ]);
    expect(JSON.stringify(await h.stored('s'))).not.toContain('too slow for bob');
  });
});
