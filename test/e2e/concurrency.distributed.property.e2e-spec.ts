import { EventEmitter2 } from '@nestjs/event-emitter';
import fc from 'fast-check';
import {
  WellKnownMetadataKeys as K,
  type AbortOptions,
  type Message,
  type Settlement,
  type SqlStores,
} from '../../src';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { DistributedApps, waitFor, type DistributedApp } from '../support/distributed-apps';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/**
 * The concurrency property of `concurrency.property.e2e-spec.ts`, across two distributed
 * instances (`AgentModule.forRoot({ distribution })`) sharing one Redis prefix and one
 * PostgreSQL schema: random schedules of sends, model answers, aborts, clears and deletions, each
 * sent to either instance, with a real model server whose every answer is held until the
 * schedule releases it. Once everything settled, what must hold across instances is checked
 * against what both recorded (events, every archive write, every caller's answer): each input
 * settles once; one turn at a time per session; archived once for a `turn` settlement (with its
 * turn), never for a clear, deletion or stale generation; an abort answers true only when it
 * stopped a turn; a cleared or deleted session's history keeps nothing from before; nothing is
 * left running, waiting or on its way. Each run uses sessions of its own. `PROPERTY_RUNS` and
 * `PROPERTY_SEED` help when hunting; a failure prints the seed (fast-check) and the violations.
 */

const RUNS = Number(process.env.PROPERTY_RUNS) || (process.env.CI ? 50 : 30);
const SEED = Number(process.env.PROPERTY_SEED) || 20_261_203;
const SESSIONS = 2;
/** Held answers queued per run; model calls beyond them are answered at once. */
const HELD_ANSWERS = 12;

jest.setTimeout(170_000);

type Via = 0 | 1;
type Action =
  | { t: 'send'; s: number; via: Via }
  | { t: 'answer'; n: number }
  | { t: 'abort'; s: number; via: Via; turn: 'any' | 'running' | 'stale'; queued: boolean }
  | { t: 'clear'; sessions: number[] | 'all'; via: Via }
  | { t: 'delete'; s: number; via: Via }
  | { t: 'macro' }
  | { t: 'call' };

const session = fc.integer({ min: 0, max: SESSIONS - 1 });
const via = fc.constantFrom<Via>(0, 1);
const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ t: fc.constant('send' as const), s: session, via }) },
  {
    weight: 6,
    arbitrary: fc.record({ t: fc.constant('answer' as const), n: fc.integer({ min: 1, max: 2 }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('abort' as const),
      s: session,
      via,
      turn: fc.constantFrom('any' as const, 'running' as const, 'stale' as const),
      queued: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('clear' as const),
      sessions: fc.oneof(
        { weight: 1, arbitrary: fc.constant('all' as const) },
        { weight: 3, arbitrary: fc.subarray([0, 1], { minLength: 1 }) },
      ),
      via,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('delete' as const), s: session, via }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('macro' as const) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('call' as const) }) },
);
const scheduleArb = fc.array(actionArb, { minLength: 4, maxLength: 40 });

/** One input as the run saw it. */
interface InputRec {
  content: string;
  sessionId: string;
  sentAt: number;
  resolutions: number;
  settlement?: Settlement;
  rejected?: unknown;
}

/** A turn's start and end as the instances emitted them. */
interface TurnRec {
  turnId: string;
  sessionId: string;
  startAt: number;
  endAt?: number;
  outcome?: string;
  ends: number;
}

/** An abort, its options and answer. */
interface AbortRec {
  sessionId: string;
  at: number;
  options: AbortOptions;
  result?: boolean;
  /** When its answer came. */
  answeredAt?: number;
}

/** A clear or a deletion: when it was called, and the sessions it covered. */
interface ClearRec {
  sessions: string[] | 'all';
  at: number;
  kind: 'clear' | 'delete';
  /** When it returned (inputs sent after it are not its to drop). */
  doneAt?: number;
  failed?: unknown;
}

/** Everything one run recorded, in one order (`seq`): the test process sees both instances. */
class Run {
  seq = 0;
  readonly inputs = new Map<string, InputRec>();
  readonly turns = new Map<string, TurnRec>();
  /** Per session, the order of turn starts and ends. */
  readonly timeline = new Map<string, Array<{ start: boolean; turnId: string }>>();
  readonly appended: Array<{ at: number; message: Message }> = [];
  readonly aborts: AbortRec[] = [];
  readonly clears: ClearRec[] = [];
  readonly pending: Promise<unknown>[] = [];
  readonly violations: string[] = [];
  /** Leases an instance found lost (a stall past the lease), printed with any violation. */
  readonly lostLeases: string[] = [];

  constructor(readonly name: string) {}

  sessionId(s: number): string {
    return `${this.name}-s${s}`;
  }

  mine(sessionId: string): boolean {
    return sessionId.startsWith(`${this.name}-s`);
  }

  violation(text: string): void {
    this.violations.push(text);
  }

  /** The turn of the session started and not ended, if any (as far as the events tell). */
  running(sessionId: string): TurnRec | undefined {
    return [...this.turns.values()].find((t) => t.sessionId === sessionId && t.endAt === undefined);
  }
}

describeRedis('concurrency property across two distributed instances', () => {
  describePg('on PostgreSQL', () => {
    let server: FakeOpenAiServer;
    let db: TempDb;
    let prefix: string;
    let apps: DistributedApps;
    let run: Run | undefined;
    let runs = 0;

    /** Records every archive write of an instance, in the run's order. */
    function recordAppends(stores: SqlStores): void {
      const append = stores.log.append.bind(stores.log);
      stores.log.append = async (messages) => {
        const stored = await append(messages);
        const r = run;
        for (const message of stored) {
          if (r?.mine(message.sessionId)) r.appended.push({ at: ++r.seq, message });
        }
        return stored;
      };
    }

    /** Records the turns an instance runs, in the run's order. */
    function recordTurns(app: DistributedApp): void {
      // A lease found lost means the instance stalled past it: a violation then says so.
      const leaseLost = app.dispatcher.leaseLost.bind(app.dispatcher);
      app.dispatcher.leaseLost = (grant) => {
        const r = run;
        if (r?.mine(grant.sessionId)) {
          r.lostLeases.push(
            `${app.id} lost ${grant.sessionId} (fence ${grant.fence}) at ${++r.seq}`,
          );
        }
        leaseLost(grant);
      };
      const emitter = app.harness.app.get(EventEmitter2);
      emitter.on('agent:turn:start', (e: { sessionId: string; turnId: string }) => {
        const r = run;
        if (!r?.mine(e.sessionId)) return;
        if (r.turns.has(e.turnId)) r.violation(`turn ${e.turnId} started twice`);
        const rec: TurnRec = {
          turnId: e.turnId,
          sessionId: e.sessionId,
          startAt: ++r.seq,
          ends: 0,
        };
        r.turns.set(e.turnId, rec);
        const line = r.timeline.get(e.sessionId) ?? [];
        line.push({ start: true, turnId: e.turnId });
        r.timeline.set(e.sessionId, line);
      });
      emitter.on('agent:turn:end', (e: { sessionId: string; turnId: string; outcome: string }) => {
        const r = run;
        if (!r?.mine(e.sessionId)) return;
        const rec = r.turns.get(e.turnId);
        if (!rec) return r.violation(`turn ${e.turnId} ended without a start`);
        rec.ends++;
        rec.endAt = ++r.seq;
        rec.outcome = e.outcome;
        r.timeline.get(e.sessionId)!.push({ start: false, turnId: e.turnId });
      });
    }

    beforeAll(async () => {
      server = await FakeOpenAiServer.start();
      db = await tempPgSchema();
      prefix = testPrefix();
      apps = new DistributedApps({
        server,
        dbUrl: db.url,
        prefix,
        onStores: (stores) => recordAppends(stores),
      });
      for (const id of ['inst-a', 'inst-b']) recordTurns(await apps.start(id));
    });

    afterAll(async () => {
      server?.discardScripts();
      server?.release();
      await apps?.close();
      await server?.close();
      if (prefix) await deletePrefix(prefix);
      await db?.drop();
    });

    const agentOf = (v: Via) => apps.apps[v].harness.agent;

    function send(r: Run, s: number, v: Via): void {
      const rec: InputRec = {
        content: `${r.name}-in${r.inputs.size}`,
        sessionId: r.sessionId(s),
        sentAt: ++r.seq,
        resolutions: 0,
      };
      r.inputs.set(rec.content, rec);
      const done = agentOf(v)
        .handleMessage({ sessionId: rec.sessionId, content: rec.content })
        .then(
          (settlement) => {
            rec.resolutions++;
            rec.settlement = settlement;
          },
          (error: unknown) => {
            rec.resolutions++;
            rec.rejected = error;
          },
        );
      r.pending.push(done);
    }

    function abort(r: Run, a: Extract<Action, { t: 'abort' }>): void {
      const sessionId = r.sessionId(a.s);
      const options: AbortOptions = a.queued ? { queued: true } : {};
      if (a.turn === 'running') {
        const running = r.running(sessionId);
        if (running) options.turnId = running.turnId;
      } else if (a.turn === 'stale') {
        const ended = [...r.turns.values()].find((t) => t.sessionId === sessionId && t.endAt);
        options.turnId = ended?.turnId ?? 'no-such-turn';
      }
      const rec: AbortRec = { sessionId, at: ++r.seq, options };
      r.aborts.push(rec);
      r.pending.push(
        agentOf(a.via)
          .abortAsync(sessionId, options)
          .then(
            (result) => {
              rec.result = result;
              rec.answeredAt = ++r.seq;
            },
            (error: unknown) => r.violation(`abort of ${sessionId} failed: ${String(error)}`),
          ),
      );
    }

    function clear(r: Run, sessions: string[] | 'all', kind: 'clear' | 'delete', v: Via): void {
      const rec: ClearRec = { sessions, at: ++r.seq, kind };
      r.clears.push(rec);
      const agent = agentOf(v);
      const done =
        kind === 'delete'
          ? agent.deleteSession((sessions as string[])[0])
          : agent.clearHistory(sessions === 'all' ? undefined : sessions);
      r.pending.push(
        done.then(
          () => (rec.doneAt = ++r.seq),
          (error: unknown) => (rec.failed = error),
        ),
      );
    }

    /** Waits (bounded) for a model call to be held, unless every input has settled already. */
    async function nextCall(r: Run): Promise<void> {
      const settled = () => [...r.inputs.values()].every((i) => i.resolutions > 0);
      await waitFor(() => server.heldCount > 0 || settled(), 'a model call', 3_000).catch(
        () => undefined,
      );
    }

    async function perform(r: Run, action: Action): Promise<void> {
      switch (action.t) {
        case 'send':
          return send(r, action.s, action.via);
        case 'answer':
          return server.release(action.n);
        case 'abort':
          return abort(r, action);
        case 'clear': {
          const sessions =
            action.sessions === 'all' ? 'all' : action.sessions.map((s) => r.sessionId(s));
          return clear(r, sessions, 'clear', action.via);
        }
        case 'delete':
          return clear(r, [r.sessionId(action.s)], 'delete', action.via);
        case 'macro':
          return new Promise((resolve) => setImmediate(resolve));
        case 'call':
          return nextCall(r);
      }
    }

    /** Answers every model call from now on and waits until every call of the run returned. */
    async function drain(r: Run): Promise<void> {
      server.discardScripts();
      const deadline = Date.now() + 30_000;
      let done = false;
      void Promise.all(r.pending).then(() => (done = true));
      while (!done) {
        server.release();
        if (Date.now() > deadline) {
          r.violation('the run did not settle within 30 s');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }

    it('S1-S4, S7, S8: random schedules over two instances keep the concurrency contract', async () => {
      await fc.assert(
        fc.asyncProperty(scheduleArb, async (schedule) => {
          const r = new Run(`p${++runs}`);
          run = r;
          server.discardScripts();
          server.enqueue(
            ...Array.from({ length: HELD_ANSWERS }, (_, i) => ({
              text: `${r.name}-reply${i}`,
              hold: true,
            })),
          );
          try {
            for (const action of schedule) await perform(r, action);
            await drain(r);
            await checkIdle(r);
            await checkHistories(r);
            check(r);
          } finally {
            run = undefined;
          }
          if (r.violations.length) {
            throw new Error(
              `${r.violations.length} violation(s) in run ${r.name}:\n${r.violations.slice(0, 12).join('\n')}\nleases found lost: ${r.lostLeases.join('; ') || 'none'}\nschedule: ${JSON.stringify(schedule)}`,
            );
          }
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
    });

    /** Nothing runs, waits or is on its way for the run's sessions, on either instance. */
    async function checkIdle(r: Run): Promise<void> {
      const redis = testRedis();
      try {
        for (let s = 0; s < SESSIONS; s++) {
          const sessionId = r.sessionId(s);
          const idle = async () => {
            for (const app of apps.apps) {
              if (app.harness.agent.runningTurn(sessionId) !== undefined) return false;
              if ((await app.dispatcher.waiting(sessionId)).length) return false;
            }
            const keys = new RedisKeys(prefix);
            return (await redis.llen(keys.pending(sessionId))) === 0;
          };
          await waitFor(idle, 'idle', 5_000).catch(() =>
            r.violation(`${sessionId} still runs, waits or has inputs on their way`),
          );
          // The inbox records a settlement just after the caller has it: wait for it there too.
          const inbox = apps.apps[0].stores.inbox;
          await waitFor(
            async () => (await inbox.unsettled(sessionId)).length === 0,
            'inbox',
            5_000,
          ).catch(async () => {
            const left = (await inbox.unsettled(sessionId)).map((e) => e.message.content);
            r.violation(`${sessionId} has unsettled inputs in the inbox: ${left.join(', ')}`);
          });
        }
      } finally {
        redis.disconnect();
      }
    }

    /** A cleared or deleted session's history keeps nothing of the turns started before. */
    async function checkHistories(r: Run): Promise<void> {
      for (let s = 0; s < SESSIONS; s++) {
        const sessionId = r.sessionId(s);
        const covering = r.clears.filter(
          (c) => !c.failed && (c.sessions === 'all' || c.sessions.includes(sessionId)),
        );
        const last = Math.max(0, ...covering.map((c) => c.at));
        const history = await apps.apps[1].harness.stored(sessionId);
        for (const message of history) {
          const turnId = message.metadata[K.TurnId] as string | undefined;
          if (!turnId) continue;
          const turn = r.turns.get(turnId);
          if (!turn) r.violation(`${sessionId} history holds a message of unknown turn ${turnId}`);
          else if (turn.startAt < last) {
            r.violation(
              `${sessionId} history holds ${message.role} "${message.content}" (${message.kind ?? 'conversation'}) of turn ${turnId}, started before its last clear or deletion (${turn.startAt}-${turn.endAt} ${turn.outcome}, clear at ${last}, written at ${r.appended.find((e) => e.message.id === message.id)?.at})`,
            );
          }
        }
      }
    }

    function check(r: Run): void {
      if (process.env.PROPERTY_STATS) {
        const kinds = [...r.inputs.values()].map((i) =>
          i.settlement?.settled === 'turn'
            ? `turn:${i.settlement.outcome}`
            : i.settlement?.settled === 'dropped'
              ? `dropped:${i.settlement.reason}`
              : String(i.settlement?.settled),
        );
        const aborts = r.aborts.map((a) => String(a.result));
        console.log(
          `${r.name}: ${r.turns.size} turns; inputs ${kinds.join(' ')}; aborts ${aborts.join(' ')}; clears ${r.clears.length}`,
        );
      }
      checkTurns(r);
      for (const input of r.inputs.values()) checkInput(r, input);
      for (const a of r.aborts) checkAbort(r, a);
    }

    /**
     * S3: an abort answers true only when a turn (the one named, if any) was running while it
     * was asked (the holder stops it; a turn already past its reply may still end `replied`), and
     * true when the named turn ran from before the call until after the answer.
     */
    function checkAbort(r: Run, a: AbortRec): void {
      const named = (t: TurnRec) =>
        t.sessionId === a.sessionId &&
        (a.options.turnId === undefined || a.options.turnId === t.turnId);
      const answered = a.answeredAt ?? Infinity;
      const turns = [...r.turns.values()].filter(named);
      // A turn is running from its opening, but its start event follows its opening writes
      // (settings, archived inputs: PostgreSQL round trips here): an abort in between stops it
      // and answers true before the event. So the session's first turn to start after the call
      // counts as running during it when it ended aborted and no other abort was answered true
      // in between.
      const next = turns.filter((t) => t.startAt > a.at).sort((x, y) => x.startAt - y.startAt)[0];
      const stoppedBeforeItsStart =
        next?.outcome === 'aborted' &&
        !r.aborts.some(
          (o) =>
            o !== a &&
            o.sessionId === a.sessionId &&
            o.result === true &&
            (o.answeredAt ?? Infinity) < next.startAt &&
            o.at > a.at,
        );
      const during =
        stoppedBeforeItsStart ||
        turns.some((t) => t.startAt < answered && (t.endAt ?? Infinity) > a.at);
      const throughout = turns.some((t) => t.startAt < a.at && (t.endAt ?? Infinity) > answered);
      const seen = turns.map((t) => `${t.turnId.slice(0, 8)} ${t.startAt}-${t.endAt} ${t.outcome}`);
      const what = `abort of ${a.sessionId} ${JSON.stringify(a.options)} at ${a.at}, answered ${a.result} at ${a.answeredAt}`;
      if (a.result === true && !during)
        r.violation(`${what}, no such turn ran: ${seen.join('; ')}`);
      if (a.result === false && throughout) {
        r.violation(`${what}, though its turn ran throughout: ${seen.join('; ')}`);
      }
    }

    /** One turn at a time per session, across instances; each turn ends once. */
    function checkTurns(r: Run): void {
      for (const [sessionId, line] of r.timeline) {
        let open: string | undefined;
        for (const step of line) {
          if (step.start) {
            if (open) r.violation(`${sessionId}: turn ${step.turnId} started while ${open} ran`);
            open = step.turnId;
          } else {
            if (open !== step.turnId)
              r.violation(`${sessionId}: turn ${step.turnId} ended while ${open ?? 'none'} ran`);
            open = undefined;
          }
        }
      }
      for (const turn of r.turns.values()) {
        if (turn.ends !== 1) r.violation(`turn ${turn.turnId} ended ${turn.ends} times`);
      }
    }

    function checkInput(r: Run, input: InputRec): void {
      const name = input.content;
      if (input.resolutions !== 1) r.violation(`${name} resolved ${input.resolutions} times`);
      if (input.rejected) r.violation(`${name} rejected: ${(input.rejected as Error)?.message}`);
      const s = input.settlement;
      if (!s) return;
      const archived = r.appended.filter(
        (e) => e.message.role === 'user' && e.message.content === name,
      );
      if (archived.length > 1) r.violation(`${name} archived ${archived.length} times`);
      const turnIdOf = archived[0]?.message.metadata[K.TurnId];
      if (s.settled === 'turn') {
        const turn = r.turns.get(s.turnId);
        if (!turn) r.violation(`${name} settled in unknown turn ${s.turnId}`);
        else if (turn.outcome !== s.outcome)
          r.violation(`${name} settled ${s.outcome}, its turn ended ${turn.outcome}`);
        if (archived.length !== 1 || turnIdOf !== s.turnId)
          r.violation(
            `${name} (turn ${s.turnId}) archived ${archived.length} times, turn ${String(turnIdOf)}`,
          );
      } else if (s.settled === 'dropped' && s.reason === 'aborted') {
        if (archived.length !== 1 || turnIdOf !== undefined)
          r.violation(
            `${name} dropped by an abort, archived ${archived.length} times, turn ${String(turnIdOf)}`,
          );
        const by = r.aborts.some((a) => a.sessionId === input.sessionId && a.options.queued);
        if (!by) r.violation(`${name} dropped as aborted without an abort with queued`);
      } else if (
        s.settled === 'dropped' &&
        ['cleared', 'deleted', 'stale-generation'].includes(s.reason)
      ) {
        if (archived.length) r.violation(`${name} dropped (${s.reason}) but archived`);
        // Across instances a clear or deletion is not one instant: an input sent while one of
        // its session ran (called, not returned) may be its to drop (S4, S7).
        const cause = r.clears.some(
          (c) =>
            (c.doneAt ?? Infinity) > input.sentAt &&
            (c.sessions === 'all' || c.sessions.includes(input.sessionId)),
        );
        if (!cause) r.violation(`${name} dropped (${s.reason}) without a clear or deletion`);
      } else {
        r.violation(`${name} settled ${JSON.stringify(s)}`);
      }
    }
  });
});
