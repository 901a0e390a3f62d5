import {
  MemoryMessageLog,
  MemorySessionStore,
  StoreUnavailableError,
  type Message,
  type NewMessage,
  type Settlement,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

/** A message log whose writes fail with a driver's own words while `down` is set. */
class FlakyLog extends MemoryMessageLog {
  down = false;

  override append(messages: NewMessage[]): Promise<Message[]> {
    if (this.down) {
      return Promise.reject(new Error('invalid byte sequence for encoding "UTF8": 0x00'));
    }
    return super.append(messages);
  }
}

/** A session store that is unreachable while `down` is set. */
class FlakySessions extends MemorySessionStore {
  down = false;

  override generationOf(sessionId: string): Promise<number> {
    if (this.down) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    return super.generationOf(sessionId);
  }
}

/**
 * Store faults as users meet them (hardening): a store failure in a turn ends it `error` with a
 * notice in plain words naming the store, never the driver's text; an input that a store cannot
 * take settles `dropped` with reason `store-unavailable`; the next turn works once it is back.
 */
describe('store faults in the engine', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  it('H4: a store failure in a turn ends it error with a plain notice; the driver text stays in the log', async () => {
    const log = new FlakyLog();
    h = await AgentHarness.start({ agent: { historyStore: log, messageArchive: log } });
    log.down = true;

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'hi' });

    expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
    const error = (settled as Extract<Settlement, { settled: 'turn' }>).error ?? '';
    expect(error).toMatch(/^\[error\] The turn failed: The archive store is unavailable/);
    expect(error).not.toMatch(/UTF8|0x00/);
    const notices = h.of('outbound:message').map((m) => m.content);
    expect(notices.join(' ')).not.toMatch(/UTF8|0x00/);

    log.down = false;
    h.server.enqueue({ text: 'back' });
    expect(await h.agent.handleMessage({ sessionId: 's', content: 'again' })).toMatchObject({
      outcome: 'replied',
      reply: 'back',
    });
  });

  it('S1: an input the session store cannot take settles dropped (store-unavailable), with its stream end', async () => {
    const sessions = new FlakySessions();
    h = await AgentHarness.start({ agent: { sessionStore: sessions } });
    sessions.down = true;

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'hi' });

    expect(settled).toEqual({ settled: 'dropped', reason: 'store-unavailable' });
    expect(h.of('outbound:stream')).toEqual([{ sessionId: 's', done: true }]);
    expect(h.server.requests).toHaveLength(0);
  });

  it('deleteSession on an unreachable store rejects with StoreUnavailableError naming the store', async () => {
    const log = new FlakyLog();
    h = await AgentHarness.start({ agent: { historyStore: log, messageArchive: log } });
    jest
      .spyOn(log, 'deleteSession')
      .mockRejectedValue(new Error('server closed the connection unexpectedly'));

    const deleting = h.agent.deleteSession('s');

    await expect(deleting).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(deleting).rejects.toThrow('The history store is unavailable (deleteSession)');
  });

  it('one text policy: the model and the store see the same input text (U+0000, lone surrogates)', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'ok' });
    const content = `nul\u0000 high\uD800 low\uDC00 pair\u{1F600}`;

    await h.agent.handleMessage({ sessionId: 's', content });

    const expected = 'nul\uFFFD high\uFFFD low\uFFFD pair\u{1F600}';
    const stored = (await h.stored('s')).find((m) => m.role === 'user');
    expect(stored?.content).toBe(expected);
    const sent = h.server.requests[0].messages.find((m: { role: string }) => m.role === 'user');
    expect(sent.content).toBe(expected);
  });
});
