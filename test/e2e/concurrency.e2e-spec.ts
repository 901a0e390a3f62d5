import { EventEmitter2 } from '@nestjs/event-emitter';
import {
  ControlKinds,
  HookRegistry,
  InvalidInputError,
  SessionStore,
  ToolRegistry,
  WellKnownMetadataKeys as K,
  WorkDispatcher,
  type IncomingMessage,
  type Message,
  type SessionStore as SessionStorePort,
  type Settlement,
  type TurnAfterContext,
  type WorkDispatcher as WorkDispatcherPort,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';
import { Deferred } from '../support/deferred';

/**
 * Concurrency rules S1-S9 / I1-I14 (docs/behaviour.md), one test per rule, and seven worked
 * timelines. Model calls are held by the fake server and released explicitly; the tests wait
 * for events and requests, never for time.
 */

const alice = { platform: 'web', userId: 'alice' };

function human(sessionId: string, content: string): IncomingMessage {
  return { sessionId, content, userId: 'u1', platform: 'web' };
}
function sourced(sessionId: string, content: string, source = 'scheduler'): IncomingMessage {
  return { sessionId, content, source, platform: 'web' };
}

/** A persisted message as `[role, content, turnId, turnEntry]` (kind replaces the role of markers). */
function row(m: Message): [string, string, unknown, unknown] {
  return [m.kind ?? m.role, m.content, m.metadata[K.TurnId], m.metadata[K.TurnEntry]];
}

/**
 * Lets pending I/O and timers of zero length run, so that a wrong turn, archive or request would
 * have happened by now. Only used to assert that something does NOT happen.
 */
async function letItRun(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** Records the settlement order of handleMessage promises and counts resolutions. */
class Settlements {
  readonly order: string[] = [];
  private readonly promises = new Map<string, Promise<Settlement>>();

  track(name: string, promise: Promise<Settlement>): Promise<Settlement> {
    this.promises.set(name, promise);
    void promise.then(() => this.order.push(name));
    return promise;
  }

  get(name: string): Promise<Settlement> {
    return this.promises.get(name)!;
  }
}

describe('concurrency (S1-S9, I1-I14)', () => {
  let h: AgentHarness | undefined;
  let afters: TurnAfterContext[];
  let queueMismatches: string[];

  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** Starts a harness recording every agent:turn:after and checking S8 at every emission. */
  async function start(): Promise<AgentHarness> {
    h = await AgentHarness.start();
    afters = [];
    queueMismatches = [];
    const harness = h;
    h.app.get(HookRegistry).use('agent:turn:after', async (ctx, next) => {
      afters.push({ ...ctx, inputs: [...ctx.inputs] });
      await next();
    });
    h.app
      .get(EventEmitter2)
      .on('agent:queue', (e: { sessionId: string; waiting: IncomingMessage[] }) => {
        const truth = harness.agent.waiting(e.sessionId).map((m) => m.content);
        const sent = e.waiting.map((m) => m.content);
        if (JSON.stringify(truth) !== JSON.stringify(sent)) {
          queueMismatches.push(
            `${e.sessionId}: sent ${sent.join(',')} but waiting ${truth.join(',')}`,
          );
        }
      });
    return h;
  }

  function queues(sessionId: string): string[][] {
    return h!
      .of('agent:queue')
      .filter((e) => e.sessionId === sessionId)
      .map((e) => e.waiting.map((m) => m.content));
  }

  function waitQueue(sessionId: string, contents: string[]): Promise<unknown> {
    return h!.waitFor(
      'agent:queue',
      (e) =>
        e.sessionId === sessionId &&
        JSON.stringify(e.waiting.map((m) => m.content)) === JSON.stringify(contents),
    );
  }

  function turnStart(sessionId: string, first: string): Promise<string> {
    return h!
      .waitFor(
        'agent:turn:start',
        (e) => e.sessionId === sessionId && e.inputs[0]?.content === first,
      )
      .then((e) => e.turnId);
  }

  function streamEnds(sessionId: string): (string | undefined)[] {
    return h!
      .of('outbound:stream')
      .filter((e) => e.sessionId === sessionId && e.done)
      .map((e) => e.turnId);
  }

  /** A tool `wait` whose calls block until released; `started` resolves per call. */
  function waitTool(harness: AgentHarness) {
    const state = {
      started: new Deferred<AbortSignal>(),
      release: new Deferred<void>(),
    };
    harness.app.get(ToolRegistry).register({
      name: 'wait',
      description: 'Waits until the test releases it.',
      parameters: { type: 'object', properties: {} },
      handler: async (_args, ctx) => {
        state.started.resolve(ctx.signal);
        await Promise.race([
          state.release.promise,
          new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve())),
        ]);
        return ctx.signal.aborted ? 'stopped' : 'waited';
      },
    });
    return state;
  }

  describe('timelines', () => {
    it('timeline 1 (S2, I2, P3): a human joins a human turn through a tool call', async () => {
      const harness = await start();
      const tool = waitTool(harness);
      harness.server.enqueue(
        { toolCalls: [{ name: 'wait', arguments: {} }] },
        { text: 'both done' },
      );
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await tool.started.promise;
      const p2 = harness.agent.handleMessage(human('s', 'H2'));
      await waitQueue('s', ['H2']);
      tool.release.resolve();
      const [s1, s2] = await Promise.all([p1, p2]);

      const settled = { settled: 'turn', turnId: t1, outcome: 'replied', reply: 'both done' };
      expect(s1).toEqual(settled);
      expect(s2).toEqual(settled);
      const stored = await harness.stored('s');
      expect(stored.map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        ['assistant', '', t1, undefined],
        ['tool', 'waited', t1, undefined],
        ['user', 'H2', t1, 'joined'],
        ['assistant', 'both done', t1, undefined],
      ]);
      expect(stored[2].metadata[K.CallId]).toEqual(expect.any(String));
      expect(stored[4].metadata[K.TurnRecord]).toEqual({ outcome: 'replied' });
      // Call 2 sees the tool result, then H2.
      const call2 = harness.server.requests[1].messages;
      expect(call2.slice(-2).map((m: any) => [m.role, m.content])).toEqual([
        ['tool', 'waited'],
        ['user', 'H2'],
      ]);
      expect(harness.server.requests[0].messages.some((m: any) => m.content === 'H2')).toBe(false);
      expect(afters).toHaveLength(1);
      expect(afters[0].inputs.map((i) => i.message.content)).toEqual(['H1', 'H2']);
      expect(queues('s')).toEqual([['H2'], []]);
      expect(streamEnds('s')).toEqual([t1]);
      expect(queueMismatches).toEqual([]);
    });

    it('timeline 2 (S2, I2): a human arriving after the last model call opens the next turn', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const p2 = harness.agent.handleMessage(human('s', 'H2'));
      await waitQueue('s', ['H2']);
      harness.server.release();
      const s1 = await p1;
      expect(s1).toEqual({ settled: 'turn', turnId: t1, outcome: 'replied', reply: 'R1' });
      const s2 = await p2;
      expect(s2).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      const t2 = (s2 as { turnId: string }).turnId;
      expect(t2).not.toBe(t1);

      expect((await harness.stored('s')).map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        ['assistant', 'R1', t1, undefined],
        ['user', 'H2', t2, 'opened'],
        ['assistant', 'R2', t2, undefined],
      ]);
      expect(afters.map((a) => [a.turnId, a.inputs.map((i) => i.message.content)])).toEqual([
        [t1, ['H1']],
        [t2, ['H2']],
      ]);
      expect(queues('s')).toEqual([['H2'], []]);
      expect(harness.server.requests).toHaveLength(2);
      expect(harness.server.requests[1].messages.slice(-3).map((m: any) => m.content)).toEqual([
        'H1',
        'R1',
        'H2',
      ]);
      expect(queueMismatches).toEqual([]);
    });

    it('timeline 3 (S2, I3): sourced inputs never join; humans wait behind a sourced turn', async () => {
      const harness = await start();
      harness.server.enqueue(
        { text: 'R1', hold: true },
        { text: 'R2', hold: true },
        { text: 'R3' },
      );
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['C1']);
      void p.track('H2', harness.agent.handleMessage(human('s', 'H2')));
      void p.track('H3', harness.agent.handleMessage(human('s', 'H3')));
      await waitQueue('s', ['C1', 'H2', 'H3']);
      harness.server.release();
      const t2 = await turnStart('s', 'C1');
      await harness.server.nextRequest();
      void p.track('H4', harness.agent.handleMessage(human('s', 'H4')));
      await waitQueue('s', ['H2', 'H3', 'H4']);
      harness.server.release();
      const [h1, c1, h2, h3, h4] = await Promise.all(
        ['H1', 'C1', 'H2', 'H3', 'H4'].map((n) => p.get(n)),
      );
      const t3 = (h2 as { turnId: string }).turnId;

      expect(h1).toMatchObject({ settled: 'turn', turnId: t1, outcome: 'replied' });
      expect(c1).toMatchObject({ settled: 'turn', turnId: t2, outcome: 'replied' });
      for (const s of [h2, h3, h4])
        expect(s).toMatchObject({ settled: 'turn', turnId: t3, outcome: 'replied' });
      expect(new Set([t1, t2, t3]).size).toBe(3);
      const stored = await harness.stored('s');
      expect(stored.map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        ['assistant', 'R1', t1, undefined],
        ['user', 'C1', t2, 'opened'],
        ['assistant', 'R2', t2, undefined],
        ['user', 'H2', t3, 'opened'],
        ['user', 'H3', t3, 'opened'],
        ['user', 'H4', t3, 'opened'],
        ['assistant', 'R3', t3, undefined],
      ]);
      expect(stored[2].metadata[K.Source]).toBe('scheduler');
      expect(stored[3].metadata[K.TurnRecord]).toEqual({ outcome: 'replied', source: 'scheduler' });
      expect(queues('s')).toEqual([
        ['C1'],
        ['C1', 'H2'],
        ['C1', 'H2', 'H3'],
        ['H2', 'H3'],
        ['H2', 'H3', 'H4'],
        [],
      ]);
      expect(afters.map((a) => a.inputs.map((i) => i.message.content))).toEqual([
        ['H1'],
        ['C1'],
        ['H2', 'H3', 'H4'],
      ]);
      expect(harness.of('agent:turn:start').map((e) => e.source)).toEqual([
        undefined,
        'scheduler',
        undefined,
      ]);
      expect(p.order).toEqual(['H1', 'C1', 'H2', 'H3', 'H4']);
      expect(queueMismatches).toEqual([]);
    });

    it('timeline 4 (S3, I5, I6, P5): stop with the queue dropped', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'never finished', chunks: 3, hold: true });
      let storedAtTurnAfter: Message[] = [];
      harness.app.get(HookRegistry).use('agent:turn:after', async (_ctx, next) => {
        storedAtTurnAfter = await harness.stored('s');
        await next();
      });
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['C1']);

      expect(harness.agent.abort('s', { turnId: 'T0' })).toBe(false);
      expect(harness.agent.waiting('s').map((m) => m.content)).toEqual(['C1']);
      expect(harness.agent.runningTurn('s')).toBe(t1);
      expect(queues('s')).toEqual([['C1']]);

      expect(
        harness.agent.abort('s', {
          turnId: t1,
          queued: true,
          by: alice,
          reason: 'user pressed stop',
        }),
      ).toBe(true);
      expect(queues('s')).toEqual([['C1'], []]);
      expect(harness.agent.waiting('s')).toEqual([]);

      expect(await p.get('H1')).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(await p.get('C1')).toEqual({ settled: 'dropped', reason: 'aborted' });
      expect(p.order).toEqual(['H1', 'C1']);

      const stored = await harness.stored('s');
      expect(stored.map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        [ControlKinds.TurnStopped, expect.stringContaining('alice'), t1, undefined],
        [ControlKinds.EventMarker, '', t1, undefined],
        ['user', 'C1', undefined, undefined],
      ]);
      expect(stored[1].metadata[K.StoppedBy]).toEqual(alice);
      expect(stored[2].metadata[K.TurnRecord]).toMatchObject({ outcome: 'aborted' });
      expect(stored[2].metadata[K.TurnRecord]).not.toHaveProperty('reason');
      // I6: C1 was archived after T1's agent:turn:after.
      expect(storedAtTurnAfter.map((m) => m.content)).not.toContain('C1');
      expect(afters.map((a) => [a.turnId, a.outcome])).toEqual([[t1, 'aborted']]);
      // I9: one end marker for T1, one without turn id for C1.
      expect(streamEnds('s')).toEqual([t1, undefined]);
      // S3: reason goes only into the log line.
      expect(JSON.stringify(stored)).not.toContain('user pressed stop');
      expect(JSON.stringify(harness.events)).not.toContain('user pressed stop');
      expect(JSON.stringify(afters)).not.toContain('user pressed stop');
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(false);
      expect(queueMismatches).toEqual([]);
    });

    it('timeline 5 (S4, I10, I11): clearing holds the session', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'never finished', hold: true });
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['C1']);

      const clearStarted = new Deferred<Message[]>();
      const clearMayEnd = new Deferred<void>();
      const clearing = harness.agent.clearing(['s'], async () => {
        clearStarted.resolve(await harness.stored('s'));
        await clearMayEnd.promise;
        await harness.history.clear('s');
      });
      // t1: C1 dropped at once, before T1 settles.
      expect(await p.get('C1')).toEqual({ settled: 'dropped', reason: 'cleared' });
      expect(queues('s')).toEqual([['C1'], []]);
      // t2-t3: T1 settled (aborted, markers persisted) before clear() starts.
      const beforeClear = await clearStarted.promise;
      expect(await p.get('H1')).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(p.order).toEqual(['C1', 'H1']);
      expect(beforeClear.map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        [ControlKinds.TurnStopped, expect.any(String), t1, undefined],
        [ControlKinds.EventMarker, '', t1, undefined],
      ]);
      expect(beforeClear.map((m) => m.content)).not.toContain('C1');

      // t4: H2 arrives during clear(): held, no turn, no archive.
      expect(harness.app.get<WorkDispatcherPort>(WorkDispatcher).view.isHeld('s')).toBe(true);
      void p.track('H2', harness.agent.handleMessage(human('s', 'H2')));
      await letItRun();
      expect(harness.of('agent:turn:start')).toHaveLength(1);
      expect(harness.server.requests).toHaveLength(1);
      expect((await harness.stored('s')).map((m) => m.content)).not.toContain('H2');
      expect(p.order).toEqual(['C1', 'H1']);

      // t5: clear() ends, the hold is released, T2 opens [H2] on an empty history.
      clearMayEnd.resolve();
      await clearing;
      expect(harness.app.get<WorkDispatcherPort>(WorkDispatcher).view.isHeld('s')).toBe(false);
      const s2 = await p.get('H2');
      expect(s2).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'ok' });
      const t2 = (s2 as { turnId: string }).turnId;
      expect((await harness.stored('s')).map(row)).toEqual([
        ['user', 'H2', t2, 'opened'],
        ['assistant', 'ok', t2, undefined],
      ]);
      const call = harness.server.requests[1].messages;
      expect(call.filter((m: any) => m.role !== 'system').map((m: any) => m.content)).toEqual([
        'H2',
      ]);
      expect(streamEnds('s')).toEqual([undefined, t1, t2]);
      expect(queueMismatches).toEqual([]);
    });

    it('timeline 6 (S7): deletion drops an input of the stale generation', async () => {
      const harness = await start();
      const entered = new Deferred<void>();
      const mayGoOn = new Deferred<void>();
      harness.agent.registerPreprocessor('slow', async (_message, next) => {
        entered.resolve();
        await mayGoOn.promise;
        await next();
      });
      const sessions = harness.app.get<SessionStorePort>(SessionStore);
      const before = await sessions.generationOf('s');
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      await entered.promise;
      await harness.app.get(EventEmitter2).emitAsync('session:deleted', { sessionId: 's' });
      expect(await sessions.generationOf('s')).toBe(before + 1);
      mayGoOn.resolve();
      expect(await p1).toEqual({ settled: 'dropped', reason: 'stale-generation' });
      expect(await harness.stored('s')).toEqual([]);
      expect(harness.server.requests).toHaveLength(0);
      expect(harness.of('agent:turn:start')).toHaveLength(0);
      expect(streamEnds('s')).toEqual([undefined]);
      expect(queues('s')).toEqual([]);
    });

    it('timeline 7 (S1c, H, I9): a discarded input and a blocked turn', async () => {
      const harness = await start();
      harness.agent.registerPreprocessor('drop-h1', async (message, next) => {
        if (message.content !== 'H1') await next();
      });
      let blockedTurn: string | undefined;
      harness.app.get(HookRegistry).use('agent:turn:before', async (ctx, next) => {
        if (ctx.inputs[0].message.content === 'H2') {
          blockedTurn = ctx.turnId;
          return;
        }
        await next();
      });
      expect(await harness.agent.handleMessage(human('s', 'H1'))).toEqual({ settled: 'discarded' });
      expect(await harness.stored('s')).toEqual([]);
      expect(streamEnds('s')).toEqual([undefined]);

      const s2 = await harness.agent.handleMessage(human('s', 'H2'));
      expect(s2).toEqual({ settled: 'dropped', reason: 'blocked' });
      expect(blockedTurn).toEqual(expect.any(String));
      expect(await harness.stored('s')).toEqual([]);
      expect(harness.server.requests).toHaveLength(0);
      expect(afters).toEqual([]);
      expect(harness.of('agent:turn:end')).toEqual([]);
      expect(streamEnds('s')).toEqual([undefined, blockedTurn]);
      // The session is free again: the next input runs normally.
      expect(await harness.agent.handleMessage(human('s', 'H3'))).toMatchObject({
        settled: 'turn',
        outcome: 'replied',
      });
    });
  });

  describe('S1 handleMessage', () => {
    it('S1: each input resolves exactly once with its settlement (turn, dropped, discarded)', async () => {
      const harness = await start();
      harness.agent.registerPreprocessor('discard', async (message, next) => {
        if (message.content !== 'discard me') await next();
      });
      harness.server.enqueue({ text: 'R1', hold: true });
      const resolutions = new Map<string, number>();
      const track = (name: string, promise: Promise<Settlement>) => {
        void promise.then(() => resolutions.set(name, (resolutions.get(name) ?? 0) + 1));
        return promise;
      };
      const p1 = track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const c1 = track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['C1']);
      const d = track('D', harness.agent.handleMessage(human('s', 'discard me')));
      expect(await d).toEqual({ settled: 'discarded' });
      expect(harness.agent.abort('s', { queued: true })).toBe(true);
      expect(await p1).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(await c1).toEqual({ settled: 'dropped', reason: 'aborted' });
      await letItRun();
      expect(Object.fromEntries(resolutions)).toEqual({ H1: 1, C1: 1, D: 1 });
    });

    it('S1: an invalid input rejects with InvalidInputError (a rejection, not a throw)', async () => {
      const harness = await start();
      const bad = [
        { content: 'no session' },
        { sessionId: '  ', content: 'blank session' },
        { sessionId: 's', content: 42 },
        { sessionId: 's', content: 'x', source: '' },
        null,
      ] as unknown as IncomingMessage[];
      for (const message of bad) {
        let promise: Promise<Settlement> | undefined;
        expect(() => (promise = harness.agent.handleMessage(message))).not.toThrow();
        await expect(promise).rejects.toBeInstanceOf(InvalidInputError);
      }
      expect(harness.of('agent:turn:start')).toEqual([]);
      expect(harness.server.requests).toEqual([]);
    });
  });

  describe('S2 sessions and the single channel', () => {
    it('S2: different sessions run in parallel', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'A', hold: true }, { text: 'B', hold: true });
      const pa = harness.agent.handleMessage(human('a', 'for a'));
      const pb = harness.agent.handleMessage(human('b', 'for b'));
      await harness.server.nextRequest();
      await harness.server.nextRequest();
      expect(harness.server.heldCount).toBe(2);
      expect(harness.agent.runningTurn('a')).toEqual(expect.any(String));
      expect(harness.agent.runningTurn('b')).toEqual(expect.any(String));
      harness.server.release();
      expect(await pa).toMatchObject({ settled: 'turn', outcome: 'replied' });
      expect(await pb).toMatchObject({ settled: 'turn', outcome: 'replied' });
    });

    it('S2/I1: one session never runs two turns at once, whatever the source', async () => {
      const harness = await start();
      harness.server.enqueue(
        { text: 'R1', hold: true },
        { text: 'R2', hold: true },
        { text: 'R3' },
      );
      const running = new Set<string>();
      let overlap = false;
      harness.app.get(EventEmitter2).on('agent:turn:start', (e: { turnId: string }) => {
        if (running.size) overlap = true;
        running.add(e.turnId);
      });
      harness.app
        .get(EventEmitter2)
        .on('agent:turn:end', (e: { turnId: string }) => running.delete(e.turnId));
      const all = [
        harness.agent.handleMessage(sourced('s', 'C1', 'scheduler')),
        harness.agent.handleMessage(sourced('s', 'C2', 'webhook')),
        harness.agent.handleMessage(human('s', 'H1')),
      ];
      await harness.server.nextRequest();
      await letItRun();
      expect(harness.server.requests).toHaveLength(1);
      harness.server.release();
      await harness.server.nextRequest();
      await letItRun();
      expect(harness.server.requests).toHaveLength(2);
      harness.server.release();
      const settled = await Promise.all(all);
      expect(new Set(settled.map((s) => (s as { turnId: string }).turnId)).size).toBe(3);
      expect(overlap).toBe(false);
    });
  });

  describe('S3 abort', () => {
    it('I5, S3: a stale turnId returns false and changes nothing, also with queued', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const c1 = harness.agent.handleMessage(sourced('s', 'C1'));
      await waitQueue('s', ['C1']);
      expect(harness.agent.abort('s', { turnId: 'not-the-turn', queued: true, by: alice })).toBe(
        false,
      );
      expect(harness.agent.abort('other-session', { queued: true })).toBe(false);
      await letItRun();
      expect(harness.agent.runningTurn('s')).toBe(t1);
      expect(harness.agent.waiting('s').map((m) => m.content)).toEqual(['C1']);
      expect(queues('s')).toEqual([['C1']]);
      harness.server.release();
      expect(await p1).toMatchObject({ settled: 'turn', turnId: t1, outcome: 'replied' });
      const s2 = await c1;
      expect(s2).toMatchObject({ settled: 'turn', outcome: 'replied' });
      // The turn has settled, and a newer one too: both ids are stale now.
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(false);
      expect(harness.agent.abort('s', { turnId: (s2 as { turnId: string }).turnId })).toBe(false);
      expect(harness.agent.abort('s')).toBe(false);
    });

    it('I5: a double abort returns true until the turn has settled', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      expect(harness.agent.abort('s', { turnId: t1, by: alice })).toBe(true);
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(true);
      expect(harness.agent.abort('s')).toBe(true);
      expect(await p1).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(false);
      expect(harness.agent.abort('s')).toBe(false);
      // The first stop wins: the marker names alice.
      const stopped = (await harness.stored('s')).find((m) => m.kind === ControlKinds.TurnStopped);
      expect(stopped?.metadata[K.StoppedBy]).toEqual(alice);
      expect(afters.map((a) => a.outcome)).toEqual(['aborted']);
    });

    it('S3: by is named in the turn-stopped marker; reason appears nowhere in history or events', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const reason = 'secret-reason-7f3a';
      expect(
        harness.agent.abort('s', { turnId: t1, by: { platform: 'qq', userId: 'bob' }, reason }),
      ).toBe(true);
      expect(await p1).toMatchObject({ outcome: 'aborted' });
      const stored = await harness.stored('s');
      const marker = stored.find((m) => m.kind === ControlKinds.TurnStopped)!;
      expect(marker.role).toBe('system');
      expect(marker.content).toContain('qq:bob');
      expect(marker.metadata[K.TurnId]).toBe(t1);
      const record = stored.find((m) => m.kind === ControlKinds.EventMarker)!.metadata[
        K.TurnRecord
      ];
      expect(record).toEqual({ outcome: 'aborted', by: { platform: 'qq', userId: 'bob' } });
      expect(JSON.stringify(stored)).not.toContain(reason);
      expect(JSON.stringify(harness.events)).not.toContain(reason);
      expect(JSON.stringify(afters)).not.toContain(reason);
    });

    it('I6, S3, I9: queued drops (pending and queued) are archived without turn id after turn:after, in arrival order', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const order: string[] = [];
      harness.app.get(HookRegistry).use('agent:turn:after', async (_ctx, next) => {
        order.push('turn:after');
        await next();
      });
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('H2', harness.agent.handleMessage(human('s', 'H2')));
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      void p.track('H3', harness.agent.handleMessage(human('s', 'H3')));
      await waitQueue('s', ['H2', 'C1', 'H3']);
      expect(harness.agent.abort('s', { queued: true })).toBe(true);
      for (const n of ['H2', 'C1', 'H3']) {
        expect(await p.get(n)).toEqual({ settled: 'dropped', reason: 'aborted' });
      }
      expect(await p.get('H1')).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(p.order).toEqual(['H1', 'H2', 'C1', 'H3']);
      expect(order).toEqual(['turn:after']);
      const stored = await harness.stored('s');
      expect(stored.map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        [ControlKinds.TurnStopped, expect.any(String), t1, undefined],
        [ControlKinds.EventMarker, '', t1, undefined],
        ['user', 'H2', undefined, undefined],
        ['user', 'C1', undefined, undefined],
        ['user', 'H3', undefined, undefined],
      ]);
      expect(streamEnds('s')).toEqual([t1, undefined, undefined, undefined]);
      expect(queues('s')).toEqual([['H2'], ['H2', 'C1'], ['H2', 'C1', 'H3'], []]);
      expect(harness.server.requests).toHaveLength(1);
      expect(queueMismatches).toEqual([]);
    });

    it('S3: without queued, the next turn opens from the waiting inputs', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true }, { text: 'R2' });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const p2 = harness.agent.handleMessage(human('s', 'H2'));
      await waitQueue('s', ['H2']);
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(true);
      expect(await p1).toMatchObject({ outcome: 'aborted' });
      const s2 = await p2;
      expect(s2).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      const t2 = (s2 as { turnId: string }).turnId;
      expect((await harness.stored('s')).map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        [ControlKinds.TurnStopped, expect.any(String), t1, undefined],
        [ControlKinds.EventMarker, '', t1, undefined],
        ['user', 'H2', t2, 'opened'],
        ['assistant', 'R2', t2, undefined],
      ]);
    });

    it('S3: stopping cancels a running tool call through its AbortSignal', async () => {
      const harness = await start();
      const tool = waitTool(harness);
      harness.server.enqueue({ toolCalls: [{ name: 'wait', arguments: {} }] });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      const signal = await tool.started.promise;
      expect(signal.aborted).toBe(false);
      expect(harness.agent.abort('s', { turnId: t1 })).toBe(true);
      expect(signal.aborted).toBe(true);
      expect(await p1).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(harness.server.requests).toHaveLength(1);
      expect(afters.map((a) => a.outcome)).toEqual(['aborted']);
    });
  });

  describe('S4 clearing', () => {
    it('I10, S4: a throwing clear still releases the hold and rethrows', async () => {
      const harness = await start();
      const inClear = new Deferred<void>();
      const mayThrow = new Deferred<void>();
      const clearing = harness.agent.clearing(['s'], async () => {
        inClear.resolve();
        await mayThrow.promise;
        throw new Error('clear failed');
      });
      await inClear.promise;
      const held = harness.agent.handleMessage(human('s', 'during'));
      await letItRun();
      expect(harness.server.requests).toHaveLength(0);
      mayThrow.resolve();
      await expect(clearing).rejects.toThrow('clear failed');
      expect(harness.app.get<WorkDispatcherPort>(WorkDispatcher).view.isHeld('s')).toBe(false);
      expect(await held).toMatchObject({ settled: 'turn', outcome: 'replied' });
      expect(await harness.agent.handleMessage(human('s', 'after'))).toMatchObject({
        outcome: 'replied',
      });
    });

    it('S4/I11: clearing(undefined) holds every session, also one with no state yet', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'RA', hold: true });
      const pa = harness.agent.handleMessage(human('a', 'A1'));
      const ta = await turnStart('a', 'A1');
      await harness.server.nextRequest();
      const inClear = new Deferred<void>();
      const mayEnd = new Deferred<void>();
      const holds = harness.app.get<WorkDispatcherPort>(WorkDispatcher).view;
      const clearing = harness.agent.clearing(undefined, async () => {
        inClear.resolve();
        await mayEnd.promise;
        await harness.history.clear();
      });
      await inClear.promise;
      expect(await pa).toEqual({ settled: 'turn', turnId: ta, outcome: 'aborted' });
      expect(holds.isHeld('never-seen')).toBe(true);
      const fresh = harness.agent.handleMessage(human('never-seen', 'hello'));
      await letItRun();
      expect(harness.of('agent:turn:start').filter((e) => e.sessionId === 'never-seen')).toEqual(
        [],
      );
      expect(await harness.stored('never-seen')).toEqual([]);
      mayEnd.resolve();
      await clearing;
      expect(await fresh).toMatchObject({ settled: 'turn', outcome: 'replied' });
      expect(await harness.stored('a')).toEqual([]);
    });

    it('S4: clearing without a running turn runs clear and drops nothing', async () => {
      const harness = await start();
      await harness.agent.handleMessage(human('s', 'H1'));
      let ran = false;
      await harness.agent.clearing(['s'], async () => {
        ran = true;
        await harness.history.clear('s');
      });
      expect(ran).toBe(true);
      expect(await harness.stored('s')).toEqual([]);
      expect(await harness.agent.handleMessage(human('s', 'H2'))).toMatchObject({
        outcome: 'replied',
      });
    });
  });

  describe('S7 session deletion', () => {
    it('S7: deletion stops the running turn and drops waiting inputs unarchived, before data removal', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      void p.track('C2', harness.agent.handleMessage(sourced('s', 'C2')));
      await waitQueue('s', ['C1', 'C2']);
      await harness.app.get(EventEmitter2).emitAsync('session:deleted', { sessionId: 's' });
      // By the time the listener returns, the turn has settled: its markers are written.
      expect(harness.agent.runningTurn('s')).toBeUndefined();
      expect(afters.map((a) => [a.turnId, a.outcome])).toEqual([[t1, 'aborted']]);
      const stored = await harness.stored('s');
      expect(await p.get('H1')).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(await p.get('C1')).toEqual({ settled: 'dropped', reason: 'deleted' });
      expect(await p.get('C2')).toEqual({ settled: 'dropped', reason: 'deleted' });
      expect(stored.map((m) => m.content)).not.toContain('C1');
      expect(stored.map((m) => m.content)).not.toContain('C2');
      expect(stored.map((m) => m.metadata[K.TurnId])).toEqual([t1, t1, t1]);
      // The host removes the data now: nothing of the old generation is written after it.
      await harness.history.deleteSession('s');
      await letItRun();
      expect(await harness.stored('s')).toEqual([]);
      expect(queues('s')).toEqual([['C1'], ['C1', 'C2'], []]);
      expect(streamEnds('s').filter((t) => t === undefined)).toHaveLength(2);
    });

    it('S7: an input waiting at a clearing hold is dropped when the session was deleted meanwhile', async () => {
      const harness = await start();
      const inClear = new Deferred<void>();
      const mayEnd = new Deferred<void>();
      const clearing = harness.agent.clearing(['s'], async () => {
        inClear.resolve();
        await mayEnd.promise;
      });
      await inClear.promise;
      const held = harness.agent.handleMessage(human('s', 'old generation'));
      await harness.app.get(EventEmitter2).emitAsync('session:deleted', { sessionId: 's' });
      mayEnd.resolve();
      await clearing;
      expect(await held).toEqual({ settled: 'dropped', reason: 'stale-generation' });
      expect(await harness.stored('s')).toEqual([]);
      expect(harness.server.requests).toHaveLength(0);
    });

    it('S4/S7: deletion run inside the clear callback does not deadlock', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p1 = harness.agent.handleMessage(human('s', 'H1'));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      const c1 = harness.agent.handleMessage(sourced('s', 'C1'));
      await waitQueue('s', ['C1']);
      await harness.agent.clearing(['s'], async () => {
        await harness.app.get(EventEmitter2).emitAsync('session:deleted', { sessionId: 's' });
        await harness.history.deleteSession('s');
      });
      expect(await p1).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(await c1).toEqual({ settled: 'dropped', reason: 'cleared' });
      expect(await harness.stored('s')).toEqual([]);
      // The session is usable again, in its new generation.
      expect(await harness.agent.handleMessage(human('s', 'H2'))).toMatchObject({
        outcome: 'replied',
      });
    });
  });

  describe('S8 agent:queue', () => {
    it('S8: every emission equals the true waiting list, and the last one is empty', async () => {
      const harness = await start();
      const tool = waitTool(harness);
      harness.server.enqueue(
        { toolCalls: [{ name: 'wait', arguments: {} }] },
        { text: 'R1', hold: true },
        { text: 'R2', hold: true },
      );
      const all: Promise<Settlement>[] = [];
      all.push(harness.agent.handleMessage(human('s', 'H1')));
      await harness.server.nextRequest(); // call 1 of T1: the tool call
      await tool.started.promise;
      all.push(harness.agent.handleMessage(human('s', 'H2')));
      all.push(harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['H2', 'C1']);
      tool.release.resolve();
      await harness.server.nextRequest(); // call 2 of T1; H2 joined
      await waitQueue('s', ['C1']);
      all.push(harness.agent.handleMessage(human('s', 'H3')));
      await waitQueue('s', ['C1', 'H3']);
      harness.server.release();
      await harness.server.nextRequest(); // T2 [C1]
      all.push(harness.agent.handleMessage(sourced('s', 'C2')));
      await waitQueue('s', ['H3', 'C2']);
      expect(harness.agent.abort('s', { queued: true })).toBe(true);
      await Promise.all(all);
      expect(queues('s')).toEqual([
        ['H2'],
        ['H2', 'C1'],
        ['C1'],
        ['C1', 'H3'],
        ['H3'],
        ['H3', 'C2'],
        [],
      ]);
      expect(queueMismatches).toEqual([]);
      for (const e of harness.of('agent:queue')) {
        for (const m of e.waiting) expect(m.sessionId).toBe(e.sessionId);
      }
    });
  });

  describe('S9 shutdown', () => {
    it('I14, S9: app.close() during a held turn aborts it, drops and archives waiting inputs, resolves everything', async () => {
      const harness = await start();
      harness.server.enqueue({ text: 'R1', hold: true });
      const p = new Settlements();
      void p.track('H1', harness.agent.handleMessage(human('s', 'H1')));
      const t1 = await turnStart('s', 'H1');
      await harness.server.nextRequest();
      void p.track('H2', harness.agent.handleMessage(human('s', 'H2')));
      void p.track('C1', harness.agent.handleMessage(sourced('s', 'C1')));
      await waitQueue('s', ['H2', 'C1']);
      // An input held at a clearing hold of another session is released as dropped too.
      const inClear = new Deferred<void>();
      const mayEnd = new Deferred<void>();
      const clearing = harness.agent.clearing(['x'], async () => {
        inClear.resolve();
        await mayEnd.promise;
      });
      await inClear.promise;
      void p.track('X1', harness.agent.handleMessage(human('x', 'X1')));
      await letItRun();

      const log = harness.history;
      h = undefined;
      await harness.app.close();
      expect(await p.get('H1')).toEqual({ settled: 'turn', turnId: t1, outcome: 'aborted' });
      expect(await p.get('H2')).toEqual({ settled: 'dropped', reason: 'shutdown' });
      expect(await p.get('C1')).toEqual({ settled: 'dropped', reason: 'shutdown' });
      expect(await p.get('X1')).toEqual({ settled: 'dropped', reason: 'shutdown' });
      expect(afters.map((a) => [a.turnId, a.outcome])).toEqual([[t1, 'aborted']]);
      expect((await log.history('s')).map(row)).toEqual([
        ['user', 'H1', t1, 'opened'],
        [ControlKinds.TurnStopped, expect.any(String), t1, undefined],
        [ControlKinds.EventMarker, '', t1, undefined],
        ['user', 'H2', undefined, undefined],
        ['user', 'C1', undefined, undefined],
      ]);
      expect((await log.history('x')).map(row)).toEqual([['user', 'X1', undefined, undefined]]);
      mayEnd.resolve();
      await clearing;
      await harness.server.close();
    });
  });
});
