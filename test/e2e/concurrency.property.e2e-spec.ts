import { EventEmitter2, EventEmitterModule } from '@nestjs/event-emitter';
import { Test, type TestingModule } from '@nestjs/testing';
import fc from 'fast-check';
import {
  AgentModule,
  AgentService,
  HookRegistry,
  MemoryMessageLog,
  ToolRegistry,
  WellKnownMetadataKeys as K,
  type IncomingMessage,
  type Message,
  type NewMessage,
  type QueueEvent,
  type Settlement,
} from '../../src';
import { Deferred } from '../support/deferred';
import { ScriptedProvider } from '../../src/testing';

/**
 * Random schedules over 1-3 sessions against the real AgentModule (in-memory stores, an
 * in-process scripted model whose calls are answered in random order): inputs of both kinds,
 * tool loops, model failures, aborts, clearing (some sessions or all), deletion, slow
 * preprocessors, discarded inputs and blocked turns. After each run, once everything settled,
 * the concurrency contract (S1-S4, S7, S8, I1-I11) is checked against what was recorded. A
 * second property ends each run with the application's shutdown instead (S9, I14). Everything
 * is driven by promises only (no timers, no I/O), so a reported seed replays the same
 * interleaving. `PROPERTY_RUNS`, `PROPERTY_SHUTDOWN_RUNS` and `PROPERTY_STATS=1` help when
 * hunting.
 */

const SESSIONS = 3;
const NUM_RUNS = Number(process.env.PROPERTY_RUNS) || (process.env.CI ? 1000 : 200);

/** The archive and history, recording each stored message with the tick it was written at. */
class RecordingLog extends MemoryMessageLog {
  onAppend?: (stored: Message[]) => void;

  override async append(messages: NewMessage[]): Promise<Message[]> {
    const stored = await super.append(messages);
    this.onAppend?.(stored);
    return stored;
  }
}

type Flag = 'none' | 'discard' | 'block' | 'slow';

type Action =
  | { t: 'send'; s: number; human: boolean; flag: Flag }
  | { t: 'answer'; k: number; tools: number; fail: boolean }
  | { t: 'abort'; s: number; turn: 'none' | 'running' | 'stale' | 'old'; queued: boolean }
  | { t: 'abortAll'; queued: boolean }
  | { t: 'clear'; sessions: number[] | 'all' }
  | { t: 'endClear'; k: number; fail: boolean }
  | { t: 'delete'; s: number }
  | { t: 'unslow'; k: number }
  | { t: 'micro'; n: number }
  | { t: 'macro' };

const session = fc.integer({ min: 0, max: SESSIONS - 1 });
const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 14,
    arbitrary: fc.record({
      t: fc.constant('send' as const),
      s: session,
      human: fc.boolean(),
      flag: fc.oneof(
        { weight: 12, arbitrary: fc.constant<Flag>('none') },
        { weight: 1, arbitrary: fc.constant<Flag>('discard') },
        { weight: 1, arbitrary: fc.constant<Flag>('block') },
        { weight: 2, arbitrary: fc.constant<Flag>('slow') },
      ),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      t: fc.constant('answer' as const),
      k: fc.nat(5),
      tools: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 2 })),
      fail: fc.constant(false),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('abort' as const),
      s: session,
      turn: fc.constantFrom('none' as const, 'running' as const, 'stale' as const, 'old' as const),
      queued: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('abortAll' as const), queued: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('clear' as const),
      sessions: fc.oneof(fc.constant('all' as const), fc.subarray([0, 1, 2], { minLength: 1 })),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant('endClear' as const), k: fc.nat(3), fail: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('delete' as const), s: session }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('unslow' as const), k: fc.nat(3) }) },
  {
    weight: 4,
    arbitrary: fc.record({ t: fc.constant('micro' as const), n: fc.integer({ min: 1, max: 30 }) }),
  },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('macro' as const) }) },
);

/**
 * A schedule: actions, each followed by a pause drawn with it (none, some microtasks, or a full
 * turn of the event loop) so that actions land at every stage of the turns they race with. Model
 * failures are rare: one answer in eight fails.
 */
type Step = { action: Action; pause: number };
const scheduleArb: fc.Arbitrary<Step[]> = fc
  .array(fc.tuple(actionArb, fc.nat(7), fc.nat(40)), { minLength: 5, maxLength: 60, size: '+1' })
  .map((steps) =>
    steps.map(([action, roll, pause]) => ({
      action: action.t === 'answer' ? { ...action, fail: roll === 0 } : action,
      pause,
    })),
  );

/** One input as the run saw it. */
interface InputRec {
  content: string;
  sessionId: string;
  human: boolean;
  flag: Flag;
  /** Tick of the handleMessage call. */
  entryTick: number;
  /** Deletions of its session started before it arrived. */
  entryEpoch: number;
  settlement?: Settlement;
  resolutions: number;
  rejected?: unknown;
}

interface TurnRec {
  turnId: string;
  sessionId: string;
  opening: string[];
  beforeTick: number;
  passed: boolean;
  afters: number;
  afterTick?: number;
  afterInputs?: string[];
}

interface AbortRec {
  sessionId: string;
  running?: string;
  waitingBefore: string[];
  queued: boolean;
  given?: string;
  result: boolean;
}

interface HoldRec {
  sessions: Set<string> | 'all';
  startTick: number;
  endTick?: number;
}

interface DeletionRec {
  sessionId: string;
  index: number;
  startTick: number;
  removedTick?: number;
}

/** Everything one run records. */
class RunState {
  tick = 0;
  readonly inputs = new Map<string, InputRec>();
  readonly turns = new Map<string, TurnRec>();
  readonly finishedTurns = new Map<string, string[]>();
  readonly appended: { tick: number; message: Message }[] = [];
  readonly aborts: AbortRec[] = [];
  readonly holds: HoldRec[] = [];
  readonly deletions: DeletionRec[] = [];
  readonly violations: string[] = [];
  readonly lastQueue = new Map<string, string[]>();
  /** When an input left the waiting list (joined inputs enter their turn then). */
  readonly leftQueue = new Map<string, number>();
  readonly activeBySession = new Map<string, string>();
  readonly runningEvents = new Map<string, string>();
  readonly slow: Deferred<void>[] = [];
  readonly clears: { gate: Deferred<boolean>; done: Promise<unknown> }[] = [];
  readonly pending: Promise<unknown>[] = [];
  counter = 0;
  /** Tick at which the shutdown drain began (shutdown runs only). */
  closeTick?: number;

  constructor(readonly ns: string) {}

  sessionId(s: number): string {
    return `${this.ns}-s${s}`;
  }

  ownsSession(sessionId: string): boolean {
    return sessionId.startsWith(`${this.ns}-`);
  }

  violation(text: string): void {
    this.violations.push(text);
  }

  held(sessionId: string): boolean {
    return this.holds.some(
      (h) => h.endTick === undefined && (h.sessions === 'all' || h.sessions.has(sessionId)),
    );
  }
}

describe('concurrency property (S1-S4, S7-S9, I1-I14)', () => {
  // The system under test; the shutdown property boots a fresh one per run.
  let moduleRef: TestingModule;
  let agent: AgentService;
  let emitter: EventEmitter2;
  let provider: ScriptedProvider;
  let log: RecordingLog;
  let shared:
    | {
        moduleRef: TestingModule;
        agent: AgentService;
        emitter: EventEmitter2;
        provider: ScriptedProvider;
        log: RecordingLog;
      }
    | undefined;
  let run: RunState | undefined;
  let runs = 0;
  /** Totals over all runs, to see that schedules reach the interesting states. */
  const stats: Record<string, number> = {};
  const count = (key: string) => (stats[key] = (stats[key] ?? 0) + 1);

  /** Boots the real AgentModule with the scripted model and the recording log, wired to `run`. */
  async function boot(shutdownTimeoutMs = 10_000): Promise<void> {
    provider = new ScriptedProvider();
    log = new RecordingLog();
    moduleRef = await Test.createTestingModule({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentModule.forRoot({
          llmProvider: provider,
          historyStore: log,
          messageArchive: log,
          maxToolIterations: 3,
          historyLimit: 20,
          shutdownTimeoutMs,
        }),
      ],
    }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
    agent = moduleRef.get(AgentService);
    emitter = moduleRef.get(EventEmitter2);
    const hooks = moduleRef.get(HookRegistry);

    moduleRef.get(ToolRegistry).register({
      name: 'work',
      description: 'Does some work.',
      parameters: { type: 'object', properties: {} },
      handler: async () => 'worked',
    });

    log.onAppend = (stored) => {
      for (const message of stored) {
        if (run?.ownsSession(message.sessionId)) run.appended.push({ tick: ++run.tick, message });
      }
    };

    agent.registerPreprocessor('property', async (message, next) => {
      if (message.content.includes('#discard')) return;
      if (message.content.includes('#slow') && run) {
        const gate = new Deferred<void>();
        run.slow.push(gate);
        await gate.promise;
      }
      await next();
    });

    hooks.use('agent:turn:before', async (ctx, next) => {
      const r = run;
      if (!r?.ownsSession(ctx.sessionId)) return next();
      const turn: TurnRec = {
        turnId: ctx.turnId,
        sessionId: ctx.sessionId,
        opening: ctx.inputs.map((i) => i.message.content),
        beforeTick: ++r.tick,
        passed: false,
        afters: 0,
      };
      r.turns.set(ctx.turnId, turn);
      // I1: one running turn per session.
      const active = r.activeBySession.get(ctx.sessionId);
      if (active)
        r.violation(`turn ${ctx.turnId} began while ${active} still ran in ${ctx.sessionId}`);
      // S4: no turn starts while its session is held.
      if (r.held(ctx.sessionId))
        r.violation(`turn ${ctx.turnId} began while ${ctx.sessionId} was held`);
      // S9: no turn begins once shutdown has begun.
      if (r.closeTick !== undefined) r.violation(`turn ${ctx.turnId} began during shutdown`);
      for (const input of ctx.inputs) {
        if (input.message.sessionId !== ctx.sessionId)
          r.violation(`turn ${ctx.turnId} mixes sessions`);
        if (input.message.source !== ctx.inputs[0].message.source) {
          r.violation(`turn ${ctx.turnId} mixes sources`);
        }
      }
      if (ctx.inputs.length > 1 && ctx.inputs[0].message.source !== undefined) {
        r.violation(`sourced turn ${ctx.turnId} opened with ${ctx.inputs.length} inputs`);
      }
      if (ctx.inputs[0].message.content.includes('#block')) return;
      turn.passed = true;
      r.activeBySession.set(ctx.sessionId, ctx.turnId);
      await next();
    });

    hooks.use('agent:turn:after', async (ctx, next) => {
      const r = run;
      const turn = r?.turns.get(ctx.turnId);
      if (r && turn) {
        turn.afters++;
        turn.afterTick = ++r.tick;
        turn.afterInputs = ctx.inputs.map((i) => i.message.content);
        // S2: joined inputs are human inputs of a human-opened turn; one turn, one source.
        for (const input of ctx.inputs) {
          if (input.message.source !== ctx.inputs[0].message.source) {
            r.violation(`turn ${ctx.turnId} ended with mixed sources`);
          }
          if (input.message.sessionId !== ctx.sessionId)
            r.violation(`turn ${ctx.turnId} mixes sessions`);
        }
        if (r.activeBySession.get(ctx.sessionId) === ctx.turnId)
          r.activeBySession.delete(ctx.sessionId);
        r.finishedTurns.set(ctx.sessionId, [
          ...(r.finishedTurns.get(ctx.sessionId) ?? []),
          ctx.turnId,
        ]);
      }
      await next();
    });

    emitter.on('agent:queue', (e: QueueEvent) => {
      const r = run;
      if (!r?.ownsSession(e.sessionId)) return;
      const sent = e.waiting.map((m) => m.content);
      const truth = agent.waiting(e.sessionId).map((m) => m.content);
      if (sent.join('|') !== truth.join('|')) {
        r.violation(
          `agent:queue for ${e.sessionId} sent [${sent.join(', ')}] while waiting was [${truth.join(', ')}]`,
        );
      }
      // Inputs that left the waiting list now entered a turn (or were dropped) at this tick.
      const tick = ++r.tick;
      for (const content of r.lastQueue.get(e.sessionId) ?? []) {
        if (!sent.includes(content)) r.leftQueue.set(content, tick);
      }
      r.lastQueue.set(e.sessionId, sent);
    });
    emitter.on('agent:turn:start', (e: { sessionId: string; turnId: string }) => {
      const r = run;
      if (!r?.ownsSession(e.sessionId)) return;
      const other = r.runningEvents.get(e.sessionId);
      if (other) r.violation(`agent:turn:start ${e.turnId} while ${other} ran in ${e.sessionId}`);
      r.runningEvents.set(e.sessionId, e.turnId);
    });
    emitter.on('agent:turn:end', (e: { sessionId: string; turnId: string }) => {
      const r = run;
      if (!r?.ownsSession(e.sessionId)) return;
      if (r.runningEvents.get(e.sessionId) === e.turnId) r.runningEvents.delete(e.sessionId);
    });
  }

  beforeAll(async () => {
    await boot();
    shared = { moduleRef, agent, emitter, provider, log };
  });

  /** Back to the application shared by the runs of the main property. */
  function useShared(): void {
    ({ moduleRef, agent, emitter, provider, log } = shared!);
  }

  afterAll(async () => {
    if (process.env.PROPERTY_STATS) process.stdout.write(`${JSON.stringify(stats, null, 1)}\n`);
    await shared?.moduleRef.close();
  });

  /** Lets every promise chain run (the whole system is promise-driven: no timers, no I/O). */
  const macro = () => new Promise<void>((resolve) => setImmediate(resolve));

  async function rounds(n: number): Promise<void> {
    for (let i = 0; i < n; i++) await macro();
  }

  async function micro(n: number): Promise<void> {
    for (let i = 0; i < n; i++) await Promise.resolve();
  }

  function send(r: RunState, a: Extract<Action, { t: 'send' }>): void {
    const sessionId = r.sessionId(a.s);
    const content = `${sessionId}:${++r.counter}${a.human ? 'h' : 'c'}${a.flag === 'none' ? '' : `#${a.flag}`}`;
    const rec: InputRec = {
      content,
      sessionId,
      human: a.human,
      flag: a.flag,
      entryTick: ++r.tick,
      entryEpoch: r.deletions.filter((d) => d.sessionId === sessionId).length,
      resolutions: 0,
    };
    r.inputs.set(content, rec);
    const message: IncomingMessage = {
      sessionId,
      content,
      userId: 'u',
      platform: 'web',
      ...(a.human ? {} : { source: 'scheduler' }),
    };
    r.pending.push(
      agent.handleMessage(message).then(
        (settlement) => {
          rec.resolutions++;
          rec.settlement = settlement;
        },
        (error: unknown) => {
          rec.resolutions++;
          rec.rejected = error;
        },
      ),
    );
  }

  /** Answers the k-th open model call: text, tool calls (when tools were offered) or a failure. */
  function answer(a: Extract<Action, { t: 'answer' }>): void {
    const open = provider.open();
    if (!open.length) return;
    const call = open[a.k % open.length];
    if (a.fail) call.fail(new Error('scripted failure'));
    else if (a.tools && call.offersTools) {
      call.answer({ toolCalls: Array.from({ length: a.tools }, () => ({ name: 'work' })) });
    } else call.answer({ text: `reply to ${call.marker}` });
  }

  function abort(r: RunState, a: Extract<Action, { t: 'abort' }>): void {
    const sessionId = r.sessionId(a.s);
    const running = agent.runningTurn(sessionId);
    const finished = r.finishedTurns.get(sessionId) ?? [];
    const given =
      a.turn === 'none'
        ? undefined
        : a.turn === 'running'
          ? running
          : a.turn === 'old'
            ? (finished[finished.length - 1] ?? 'old-turn')
            : 'stale-turn';
    const waitingBefore = agent.waiting(sessionId).map((m) => m.content);
    const result = agent.abort(sessionId, {
      ...(given !== undefined ? { turnId: given } : {}),
      queued: a.queued,
      by: { platform: 'web', userId: 'stopper' },
      reason: 'property-reason',
    });
    const expected = running !== undefined && (given === undefined || given === running);
    if (result !== expected) {
      r.violation(`abort(${sessionId}, ${given}) returned ${result} with ${running} running`);
    }
    const waitingAfter = agent.waiting(sessionId).map((m) => m.content);
    const mismatch = given !== undefined && given !== running;
    if ((mismatch || !a.queued) && waitingAfter.join('|') !== waitingBefore.join('|')) {
      r.violation(`abort(${sessionId}, ${given}) without effect changed the waiting list`);
    }
    if (!mismatch && a.queued && waitingAfter.length) {
      r.violation(`abort(${sessionId}, queued) left [${waitingAfter.join(', ')}] waiting`);
    }
    r.aborts.push({ sessionId, running, waitingBefore, queued: a.queued, given, result });
  }

  /**
   * Stop all: every session's running turn is stopped (and with `queued` its waiting inputs
   * dropped) at the call, as one `abort` without turn id per session would; the answer names
   * exactly the sessions that had a running turn.
   */
  function abortAll(r: RunState, a: Extract<Action, { t: 'abortAll' }>): void {
    const before = Array.from({ length: SESSIONS }, (_, s) => {
      const sessionId = r.sessionId(s);
      return {
        sessionId,
        running: agent.runningTurn(sessionId),
        waitingBefore: agent.waiting(sessionId).map((m) => m.content),
      };
    });
    const answer = agent.abortAll({
      queued: a.queued,
      by: { platform: 'web', userId: 'stopper' },
      reason: 'property-reason',
    });
    for (const { sessionId, running, waitingBefore } of before) {
      const waitingAfter = agent.waiting(sessionId).map((m) => m.content);
      if (!a.queued && waitingAfter.join('|') !== waitingBefore.join('|')) {
        r.violation(`abortAll() changed the waiting list of ${sessionId}`);
      }
      if (a.queued && waitingAfter.length) {
        r.violation(`abortAll(queued) left [${waitingAfter.join(', ')}] waiting in ${sessionId}`);
      }
      const result = running !== undefined;
      r.aborts.push({
        sessionId,
        running,
        waitingBefore,
        queued: a.queued,
        given: undefined,
        result,
      });
    }
    const expected = before.filter((b) => b.running !== undefined).map((b) => b.sessionId);
    r.pending.push(
      answer.then((stopped) => {
        if ([...stopped].sort().join('|') !== expected.sort().join('|')) {
          r.violation(
            `abortAll() answered [${stopped.join(', ')}], running were [${expected.join(', ')}]`,
          );
        }
      }),
    );
  }

  function clear(r: RunState, a: Extract<Action, { t: 'clear' }>): void {
    const ids = a.sessions === 'all' ? undefined : a.sessions.map((s) => r.sessionId(s));
    const hold: HoldRec = { sessions: ids ? new Set(ids) : 'all', startTick: ++r.tick };
    r.holds.push(hold);
    const gate = new Deferred<boolean>();
    const done = agent
      .clearing(ids, async () => {
        const fail = await gate.promise;
        if (ids) for (const id of ids) await log.clear(id);
        else await log.clear();
        hold.endTick = ++r.tick;
        if (fail) throw new Error('clear failed on purpose');
      })
      .then(
        () => {
          if (hold.endTick === undefined) r.violation('clearing resolved without running clear');
        },
        (error: unknown) => {
          if ((error as Error)?.message !== 'clear failed on purpose') {
            r.violation(`clearing rejected with ${String(error)}`);
          }
        },
      );
    r.clears.push({ gate, done });
    r.pending.push(done);
  }

  function endClear(r: RunState, k: number, fail: boolean): void {
    const open = r.clears.filter((c) => !c.gate.settled);
    if (open.length) open[k % open.length].gate.resolve(fail);
  }

  function remove(r: RunState, s: number): void {
    const sessionId = r.sessionId(s);
    const deletion: DeletionRec = {
      sessionId,
      index: r.deletions.filter((d) => d.sessionId === sessionId).length,
      startTick: ++r.tick,
    };
    r.deletions.push(deletion);
    r.pending.push(
      emitter.emitAsync('session:deleted', { sessionId }).then(async () => {
        deletion.removedTick = ++r.tick;
        await log.deleteSession(sessionId);
      }),
    );
  }

  async function perform(r: RunState, action: Action): Promise<void> {
    switch (action.t) {
      case 'send':
        return send(r, action);
      case 'answer':
        return answer(action);
      case 'abort':
        return abort(r, action);
      case 'abortAll':
        return abortAll(r, action);
      case 'clear':
        return clear(r, action);
      case 'endClear':
        return endClear(r, action.k, action.fail);
      case 'delete':
        return remove(r, action.s);
      case 'unslow': {
        const open = r.slow.filter((g) => !g.settled);
        if (open.length) open[action.k % open.length].resolve();
        return;
      }
      case 'micro':
        return micro(action.n);
      case 'macro':
        return macro();
    }
  }

  /** Ends every clear, releases every slow preprocessor and answers every call until all settled. */
  async function drain(r: RunState): Promise<void> {
    for (let round = 0; round < 400; round++) {
      await macro();
      for (const c of r.clears) c.gate.resolve(false);
      for (const g of r.slow) g.resolve();
      const open = provider.open();
      for (const call of open) call.answer({ text: `reply to ${call.marker}` });
      if (open.length) continue;
      const unsettled = [...r.inputs.values()].filter((i) => !i.resolutions);
      if (!unsettled.length && r.deletions.every((d) => d.removedTick !== undefined)) {
        await Promise.all(r.pending);
        return;
      }
    }
    const unsettled = [...r.inputs.values()].filter((i) => !i.resolutions).map((i) => i.content);
    r.violation(`never settled: [${unsettled.join(', ')}]`);
  }

  /** The input an archived message belongs to (inputs by content, the rest by turn). */
  function ownerOf(r: RunState, message: Message): InputRec | undefined {
    if (message.role === 'user') return r.inputs.get(message.content);
    const turnId = message.metadata[K.TurnId] as string | undefined;
    const turn = turnId ? r.turns.get(turnId) : undefined;
    return turn ? r.inputs.get(turn.opening[0]) : undefined;
  }

  function check(r: RunState): void {
    const archivedInputs = new Map<string, { tick: number; message: Message }[]>();
    for (const entry of r.appended) {
      if (entry.message.role !== 'user') continue;
      const list = archivedInputs.get(entry.message.content) ?? [];
      list.push(entry);
      archivedInputs.set(entry.message.content, list);
    }

    for (const input of r.inputs.values()) {
      const name = input.content;
      // S1: resolved exactly once, never rejected (all inputs are valid).
      if (input.resolutions !== 1) r.violation(`${name} resolved ${input.resolutions} times`);
      if (input.rejected) r.violation(`${name} rejected: ${(input.rejected as Error)?.message}`);
      const s = input.settlement;
      if (!s) continue;
      count(
        s.settled === 'dropped'
          ? `dropped:${s.reason}`
          : s.settled === 'turn'
            ? `turn:${s.outcome}`
            : s.settled,
      );
      const archived = archivedInputs.get(name) ?? [];
      if (archived.length > 1) r.violation(`${name} archived ${archived.length} times`);
      const record = archived[0];
      const turnIdOf = (m?: Message) => m?.metadata[K.TurnId];
      // An input may be dropped before it reaches the preprocessor that would discard it.
      const early =
        s.settled === 'dropped' && (s.reason === 'shutdown' || s.reason === 'stale-generation');
      if (
        input.flag === 'discard' ? s.settled !== 'discarded' && !early : s.settled === 'discarded'
      ) {
        r.violation(`${name} settled ${s.settled}`);
      }
      if (s.settled === 'turn') {
        const turn = r.turns.get(s.turnId);
        if (!turn) {
          r.violation(`${name} settled in unknown turn ${s.turnId}`);
          continue;
        }
        if (!record || turnIdOf(record.message) !== s.turnId) {
          r.violation(
            `${name} (turn ${s.turnId}) archived as ${JSON.stringify(record?.message.metadata)}`,
          );
          continue;
        }
        const entry = turn.opening.includes(name) ? 'opened' : 'joined';
        count(entry);
        if (record.message.metadata[K.TurnEntry] !== entry)
          r.violation(`${name} entry is not ${entry}`);
        if (!turn.afterInputs?.includes(name))
          r.violation(`${name} missing in turn:after of ${s.turnId}`);
        // S7: the generation is checked right before the input enters its turn.
        const enteredTick = entry === 'opened' ? turn.beforeTick : (r.leftQueue.get(name) ?? 0);
        if (!enteredTick) r.violation(`${name} joined without leaving the waiting list`);
        const deleted = r.deletions.find(
          (d) =>
            d.sessionId === input.sessionId &&
            d.startTick > input.entryTick &&
            d.startTick < enteredTick,
        );
        if (deleted)
          r.violation(`${name} entered a turn although its session was deleted meanwhile`);
      } else if (s.settled === 'dropped' && (s.reason === 'aborted' || s.reason === 'shutdown')) {
        // S3 / I14: archived once, without turn id.
        if (
          !record ||
          turnIdOf(record.message) !== undefined ||
          record.message.metadata[K.TurnEntry]
        ) {
          r.violation(
            `${name} dropped (${s.reason}) but archived as ${JSON.stringify(record?.message.metadata)}`,
          );
          continue;
        }
        if (s.reason === 'shutdown') {
          if (r.closeTick === undefined)
            r.violation(`${name} dropped as shutdown without a shutdown`);
          continue;
        }
        const by = r.aborts.find((a) => a.queued && a.waitingBefore.includes(name));
        if (!by) r.violation(`${name} dropped by abort, but no abort with queued saw it waiting`);
        const turn = by?.running ? r.turns.get(by.running) : undefined;
        // I6: archived after the running turn's agent:turn:after.
        if (turn?.afterTick !== undefined && record.tick < turn.afterTick) {
          r.violation(`${name} archived before the turn:after of ${turn.turnId}`);
        }
      } else {
        // Cleared, deleted, stale generation, blocked, discarded: never archived.
        if (record) r.violation(`${name} settled ${JSON.stringify(s)} but was archived`);
        if (s.settled === 'dropped') {
          const after = (tick: number) => tick > input.entryTick;
          const ok =
            s.reason === 'blocked'
              ? [...r.turns.values()].some((t) => !t.passed && t.opening.includes(name))
              : s.reason === 'cleared'
                ? r.holds.some(
                    (h) =>
                      after(h.startTick) &&
                      (h.sessions === 'all' || h.sessions.has(input.sessionId)),
                  )
                : s.reason === 'deleted' || s.reason === 'stale-generation'
                  ? r.deletions.some((d) => d.sessionId === input.sessionId && after(d.startTick))
                  : false;
          if (!ok) r.violation(`${name} dropped as ${s.reason} without cause`);
        }
      }
    }

    // H / I13: every turn that passed agent:turn:before fired agent:turn:after exactly once.
    for (const turn of r.turns.values()) {
      count(turn.passed ? 'turns' : 'blocked turns');
      if (turn.opening.length > 1) count('batched turns');
      const expected = turn.passed ? 1 : 0;
      if (turn.afters !== expected)
        r.violation(`turn ${turn.turnId} fired turn:after ${turn.afters} times`);
    }

    // S7: nothing of a deleted generation is written after the session's data was removed.
    for (const deletion of r.deletions) {
      if (deletion.removedTick === undefined) continue;
      for (const entry of r.appended) {
        if (entry.tick < deletion.removedTick || entry.message.sessionId !== deletion.sessionId)
          continue;
        const owner = ownerOf(r, entry.message);
        if (!owner) r.violation(`unowned message written for ${deletion.sessionId}`);
        else if (owner.entryEpoch <= deletion.index) {
          r.violation(
            `${owner.content} (deleted generation) wrote "${entry.message.content}" after deletion`,
          );
        }
      }
    }

    // S8: the last agent:queue of each session is its true (empty) waiting list.
    for (let s = 0; s < SESSIONS; s++) {
      const sessionId = r.sessionId(s);
      const truth = agent.waiting(sessionId).map((m) => m.content);
      if (truth.length) r.violation(`${sessionId} still has waiting inputs [${truth.join(', ')}]`);
      const last = r.lastQueue.get(sessionId);
      if (last && last.join('|') !== truth.join('|'))
        r.violation(`last agent:queue of ${sessionId} is [${last.join(', ')}]`);
      if (agent.runningTurn(sessionId)) r.violation(`${sessionId} still runs a turn`);
    }
    if (provider.open().length) r.violation('model calls still open');

    // reason never leaves the log line.
    if (r.appended.some((e) => JSON.stringify(e.message).includes('property-reason'))) {
      r.violation('an abort reason was persisted');
    }
  }

  it('S9/I14: shutdown at a random point aborts, drops and archives, and settles every input', async () => {
    // Each run boots and closes an application of its own (about 0.2 s), so fewer runs.
    const shutdownRuns = Number(process.env.PROPERTY_SHUTDOWN_RUNS) || (process.env.CI ? 80 : 25);
    await fc.assert(
      fc.asyncProperty(
        scheduleArb.map((steps) => steps.slice(0, 25)),
        async (schedule) => {
          await boot(2_000);
          const r = new RunState(`q${++runs}`);
          run = r;
          try {
            for (const { action, pause } of schedule) {
              await perform(r, action);
              if (pause >= 35) await macro();
              else if (pause >= 10) await micro(pause - 10);
            }
            // Shutdown, as far as the contract goes, is the drain of beforeApplicationShutdown.
            const drain = agent.beforeApplicationShutdown.bind(agent);
            agent.beforeApplicationShutdown = () => {
              r.closeTick = ++r.tick;
              return drain();
            };
            let closed = false;
            const closing = moduleRef.close().then(() => (closed = true));
            // Clears and slow preprocessors may go on; model calls are never answered.
            for (let round = 0; round < 200 && !closed; round++) {
              await macro();
              for (const c of r.clears) c.gate.resolve(false);
              for (const g of r.slow) g.resolve();
            }
            if (!closed) r.violation('app.close() did not return while turns were held');
            await closing;
            // S9: every handleMessage has resolved by the time close returns.
            const open = [...r.inputs.values()].filter((i) => !i.resolutions).map((i) => i.content);
            if (open.length) r.violation(`unsettled after close: [${open.join(', ')}]`);
            await Promise.race([Promise.all(r.pending), rounds(50)]);
            check(r);
          } finally {
            run = undefined;
          }
          if (r.violations.length) {
            throw new Error(
              `${r.violations.length} violation(s):\n${r.violations.slice(0, 10).join('\n')}`,
            );
          }
        },
      ),
      { numRuns: shutdownRuns },
    );
  }, 300_000);

  it('S1-S4/S7/S8/I1-I11: random schedules keep the concurrency contract', async () => {
    useShared();
    await fc.assert(
      fc.asyncProperty(scheduleArb, async (schedule) => {
        const r = new RunState(`r${++runs}`);
        run = r;
        provider.reset();
        try {
          for (const { action, pause } of schedule) {
            await perform(r, action);
            // 0-9: none; 10-34: that many microtasks less ten; 35-40: the event loop turns.
            if (pause >= 35) await macro();
            else if (pause >= 10) await micro(pause - 10);
          }
          await drain(r);
          check(r);
        } finally {
          // Leave nothing behind for the next run.
          for (const c of r.clears) c.gate.resolve(false);
          for (const g of r.slow) g.resolve();
          for (const call of provider.open()) call.answer({ text: 'late' });
          // Bounded: a run that failed to settle must not hang the next ones.
          await Promise.race([Promise.all(r.pending), rounds(50)]);
          await log.clear();
          run = undefined;
        }
        if (r.violations.length) {
          throw new Error(
            `${r.violations.length} violation(s):\n${r.violations.slice(0, 10).join('\n')}`,
          );
        }
      }),
      { numRuns: NUM_RUNS },
    );
  }, 300_000);
});
