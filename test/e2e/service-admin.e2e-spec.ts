import { EventEmitter2 } from '@nestjs/event-emitter';
import { SessionStore, type SessionStore as SessionStorePort } from '../../src';
import { AgentHarness } from '../support/agent-harness';

/**
 * What a library host gets by DI from `AgentService`: clearing and deletion that do the whole
 * job (the REST routes call the same methods), and the awaitable abort.
 */
describe('AgentService administration (clearHistory, deleteSession, abortAsync)', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  const sessions = () => h.app.get<SessionStorePort>(SessionStore);

  it('S4: clearHistory stops the running turn, holds the session and clears its history only', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'kept' });
    await h.agent.handleMessage({ sessionId: 'other', content: 'hi' });
    await h.server.nextRequest();
    h.server.enqueue({ text: 'never sent', hold: true });
    const running = h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    await h.server.nextRequest();

    const cleared = await h.agent.clearHistory(['s', 's'], 'tidy');

    expect(cleared).toEqual(['s']);
    expect(await running).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(await h.stored('s')).toEqual([]);
    expect((await h.stored('other')).map((m) => m.content)).toEqual(['hi', 'kept']);
  });

  it('S4: clearHistory() without ids clears every session and answers all', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'a' }, { text: 'b' });
    await h.agent.handleMessage({ sessionId: 'a', content: 'one' });
    await h.agent.handleMessage({ sessionId: 'b', content: 'two' });

    expect(await h.agent.clearHistory()).toBe('all');
    expect([await h.stored('a'), await h.stored('b')]).toEqual([[], []]);
  });

  it('S7: deleteSession stops the turn, runs the session:deleted listeners, deletes history and settings', async () => {
    h = await AgentHarness.start();
    const heard: string[] = [];
    h.app.get(EventEmitter2).on('session:deleted', ({ sessionId }: { sessionId: string }) => {
      heard.push(sessionId);
    });
    h.server.enqueue({ text: 'never sent', hold: true });
    const running = h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    await h.server.nextRequest();
    expect(await sessions().get('s')).toBeDefined();

    await h.agent.deleteSession('s');

    expect(await running).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(heard).toEqual(['s']);
    expect(await h.stored('s')).toEqual([]);
    expect(await sessions().get('s')).toBeUndefined();
  });

  it('S3: abortAsync answers whether it stopped a running turn, and false for a stale turnId', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'never sent', hold: true });
    const running = h.agent.handleMessage({ sessionId: 's', content: 'hello' });
    const { turnId } = await h.waitFor('agent:turn:start');
    await h.server.nextRequest();

    expect(await h.agent.abortAsync('s', { turnId: 'stale' })).toBe(false);
    expect(await h.agent.abortAsync('s', { turnId })).toBe(true);
    expect(await running).toMatchObject({ settled: 'turn', turnId, outcome: 'aborted' });
    expect(await h.agent.abortAsync('s', { turnId })).toBe(false);
  });
});
