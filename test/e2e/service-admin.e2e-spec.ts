import { EventEmitter2 } from '@nestjs/event-emitter';
import {
  ControlKinds,
  ModelNotFoundError,
  SessionStore,
  WellKnownMetadataKeys as K,
  type SessionStore as SessionStorePort,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

/**
 * What a library host gets by DI from `AgentService`: clearing and deletion that do the whole
 * job (the REST routes call the same methods), and the awaitable abort.
 */
describe('AgentService administration (clearHistory, deleteSession, abortAsync, abortAll, listSessions)', () => {
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

  it('S3: abortAll stops every running turn and answers their sessions; queued drops the waiting inputs; by is in the stop markers', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'done' });
    await h.agent.handleMessage({ sessionId: 'idle', content: 'earlier' });
    h.server.enqueue({ text: 'never a', hold: true }, { text: 'never b', hold: true });
    const a = h.agent.handleMessage({ sessionId: 'a', content: 'first a' });
    await h.server.nextRequest();
    const b = h.agent.handleMessage({ sessionId: 'b', content: 'first b' });
    await h.server.nextRequest();
    const queued = h.waitFor('agent:queue', (e) => e.sessionId === 'a' && e.waiting.length === 1);
    const waiting = h.agent.handleMessage({ sessionId: 'a', content: 'second a' });
    await queued;
    const ops = { platform: 'web', userId: 'ops' };

    const stopped = await h.agent.abortAll({ queued: true, reason: 'maintenance', by: ops });

    expect([...stopped].sort()).toEqual(['a', 'b']);
    expect(await a).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(await b).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(await waiting).toEqual({ settled: 'dropped', reason: 'aborted' });
    for (const id of ['a', 'b']) {
      const marker = (await h.stored(id)).find((m) => m.kind === ControlKinds.TurnStopped);
      expect(marker?.metadata[K.StoppedBy]).toEqual(ops);
    }
    // Nothing runs any more: a second stop-all stops nothing.
    expect(await h.agent.abortAll()).toEqual([]);
  });

  it('S3: abortAll without queued keeps the waiting inputs: each opens its turn afterwards', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'never', hold: true }, { text: 'after the stop' });
    const first = h.agent.handleMessage({ sessionId: 's', content: 'one' });
    await h.server.nextRequest();
    const queued = h.waitFor('agent:queue', (e) => e.sessionId === 's' && e.waiting.length === 1);
    const second = h.agent.handleMessage({ sessionId: 's', content: 'two' });
    await queued;

    expect(await h.agent.abortAll()).toEqual(['s']);

    expect(await first).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(await second).toMatchObject({
      settled: 'turn',
      outcome: 'replied',
      reply: 'after the stop',
    });
  });

  it('S6: updateSession creates settings before the first message; the first input names the kind; getSession shows them', async () => {
    h = await AgentHarness.start();
    expect(await h.agent.getSession('new')).toBeUndefined();

    const view = await h.agent.updateSession('new', { model: { model: 'early-model' } });

    expect(view).toEqual({
      sessionId: 'new',
      state: 'idle',
      waiting: 0,
      settings: { model: { model: 'early-model' } },
    });
    h.server.enqueue({ text: 'hello' });
    await h.agent.handleMessage({ sessionId: 'new', content: 'hi', sessionKind: 'room' });
    expect(h.server.requests.at(-1).model).toBe('early-model');
    expect((await sessions().get('new'))?.kind).toBe('room');
    const after = await h.agent.getSession('new');
    expect(after).toMatchObject({ state: 'idle', lastTurn: { outcome: 'replied' } });
  });

  it('updateSession refuses what it cannot write: a model nobody serves, a field of the wrong type', async () => {
    h = await AgentHarness.start();

    await expect(
      h.agent.updateSession('s', { model: { provider: 'nope', model: 'x' } }),
    ).rejects.toBeInstanceOf(ModelNotFoundError);
    await expect(h.agent.updateSession('s', { historyLimit: -1 })).rejects.toThrow(
      'historyLimit must be a whole number, 0 or more',
    );
    await expect(
      h.agent.updateSession('s', { think: 'yes' as unknown as boolean }),
    ).rejects.toThrow('think must be a boolean');
    expect(await h.agent.getSession('s')).toBeUndefined();
  });

  it('listSessions pages the sessions by cursor, most recent activity first: accepted inputs and ended turns count, settings changes do not', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'one' }, { text: 'two' });
    await h.agent.handleMessage({ sessionId: 'a', content: 'hi' });
    await h.agent.handleMessage({ sessionId: 'b', content: 'hi' });
    await h.agent.updateSession('c', { think: true });
    await h.agent.updateSession('a', { historyLimit: 5 });

    const first = await h.agent.listSessions({ limit: 2 });
    const rest = await h.agent.listSessions({ limit: 2, cursor: first.nextCursor });

    expect(first.sessions.map((s) => `${s.sessionId}:${s.state}`)).toEqual(['c:idle', 'b:idle']);
    expect(first.sessions[1]).toEqual({
      sessionId: 'b',
      state: 'idle',
      waiting: 0,
      lastTurn: expect.objectContaining({ outcome: 'replied' }),
      updatedAt: first.sessions[1].lastTurn!.endedAt,
    });
    expect(rest).toEqual({ sessions: [expect.objectContaining({ sessionId: 'a' })] });
    expect((await h.agent.listSessions()).sessions).toHaveLength(3);
  });

  it('listSessions: an accepted input moves its session first while its turn still runs', async () => {
    h = await AgentHarness.start();
    h.server.enqueue({ text: 'one' }, { text: 'two' });
    await h.agent.handleMessage({ sessionId: 'a', content: 'hi' });
    await h.agent.handleMessage({ sessionId: 'b', content: 'hi' });
    const before = await h.agent.listSessions();
    expect(before.sessions.map((s) => s.sessionId)).toEqual(['b', 'a']);

    await h.server.nextRequest();
    await h.server.nextRequest();
    // Times have millisecond steps: let the clock pass b's activity, so a later one can be told.
    const newest = Date.parse(before.sessions[0].updatedAt);
    while (Date.now() <= newest) await new Promise((resolve) => setImmediate(resolve));

    h.server.enqueue({ text: 'held', hold: true });
    const settled = h.agent.handleMessage({ sessionId: 'a', content: 'again' });
    // The model has the call and holds its answer: the turn runs.
    await h.server.nextRequest();

    // The turn has not ended: only the accepted input can have moved `a` ahead of `b`.
    const during = await h.agent.listSessions();
    expect(during.sessions.map((s) => `${s.sessionId}:${s.state}`)).toEqual([
      'a:running',
      'b:idle',
    ]);
    const a = during.sessions[0];
    expect(a.updatedAt > before.sessions[0].updatedAt).toBe(true);
    expect((await h.agent.listSessions({ state: 'running' })).sessions).toEqual([a]);

    h.server.release();
    await settled;
    const after = await h.agent.listSessions();
    expect(after.sessions[0].updatedAt >= a.updatedAt).toBe(true);
    expect(after.sessions[0].updatedAt).toBe(after.sessions[0].lastTurn!.endedAt);
  });

  it('listSessions refuses a bad limit, state or cursor with a TypeError naming the field', async () => {
    h = await AgentHarness.start();

    await expect(h.agent.listSessions({ limit: 0 })).rejects.toThrow(
      'limit must be a whole number from 1 to 200',
    );
    await expect(h.agent.listSessions({ limit: 201 })).rejects.toThrow(TypeError);
    await expect(h.agent.listSessions({ state: 'busy' as never })).rejects.toThrow(
      'state must be one of running, waiting, idle, held',
    );
    await expect(h.agent.listSessions({ cursor: 'nope' })).rejects.toThrow(
      'cursor must be a nextCursor of this list',
    );
  });
});
