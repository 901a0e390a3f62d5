import { newId } from '../../contracts';
import { Logger } from '@nestjs/common';
import type {
  AbortOptions,
  ApprovalDecision,
  DropReason,
  EnteredInput,
  IncomingMessage,
  LaneAdmission,
  PendingApproval,
  SessionLanes,
  Settlement,
} from '../../contracts';
import type { TurnConclusion } from '../instrumentation';
import type { EnginePorts, LaneHandle } from './ports';
import { SessionLane, type LaneInput } from './session-lane';
import { pendingInput, settleInput } from './settlement';
import { Turn, type PendingInput } from './turn';
import { archivedInput, isArchivable } from './turn-state';

/** What happens to inputs dropped from a lane. */
interface DropPlan {
  inputs: PendingInput[];
  reason: DropReason;
  /** Archive them without turn id (abort with `queued`, shutdown) or not (clearing, deletion). */
  archive: boolean;
}

/** What the scheduler runs a turn with. */
export interface TurnRunnerLike {
  run(turn: Turn, lane: LaneHandle): Promise<TurnConclusion>;
}

/**
 * The engine's `SessionLanes`: carries out the lanes' decisions, one lane per active session
 * (gone when idle), at most one running turn per session, sessions in parallel (S2, I1). Owns
 * abort (S3), the stop-and-drop of clearing, deletion and shutdown (S4, S7, S9), and
 * `agent:queue` (S8). A held session (its dispatcher says so) opens no turn.
 */
export class TurnScheduler implements SessionLanes {
  private readonly logger = new Logger('TurnScheduler');
  private readonly lanes = new Map<string, SessionLane<PendingInput>>();
  private readonly turns = new Map<string, Turn>();
  /** Inputs to archive/settle once the running turn of a session has settled (I6). */
  private readonly afterTurn = new Map<string, DropPlan[]>();
  /** Waiting list last announced per session, as arrival numbers. */
  private readonly announced = new Map<string, string>();
  private seq = 0;

  constructor(
    private readonly ports: Pick<EnginePorts, 'events' | 'archive' | 'inbox'> & {
      options: Pick<EnginePorts['options'], 'maxWaiting'>;
      /** The tool calls of this process waiting for approval (none without). */
      approvals?: Pick<EnginePorts['approvals'], 'decide' | 'list'>;
      /** Told when a running turn is stopped (tracing marks it on the turn's span). */
      instrumentation?: Pick<EnginePorts['instrumentation'], 'stopped'>;
    },
    private readonly runner: TurnRunnerLike,
    private readonly admission: LaneAdmission,
  ) {}

  enter(message: IncomingMessage): Promise<Settlement> {
    return this.admit(message).settlement.promise;
  }

  enterRecorded(message: IncomingMessage): EnteredInput {
    const input = this.admit(message);
    const settlement = input.settlement.promise;
    // `settleInput` sets `recorded` when it resolves the settlement, before this runs.
    return { settlement, recorded: settlement.then(() => input.recorded ?? false) };
  }

  /** Puts the input into its session's lane (or drops it when the waiting list is full). */
  private admit(message: IncomingMessage): PendingInput {
    const input = pendingInput(message);
    const sessionId = message.sessionId;
    let lane = this.lanes.get(sessionId);
    if (lane && lane.waitingCount >= this.ports.options.maxWaiting) {
      // The waiting list is bounded: the input never waits, so the list does not change (S8).
      void settleInput(this.ports, input, { settled: 'dropped', reason: 'queue-full' });
      return input;
    }
    if (!lane) this.lanes.set(sessionId, (lane = new SessionLane<PendingInput>()));
    lane.arrive({ seq: ++this.seq, source: message.source, payload: input });
    this.pump(sessionId);
    this.announce(sessionId);
    return input;
  }

  waiting(sessionId: string): IncomingMessage[] {
    return this.lanes.get(sessionId)?.waitingPayloads((input) => input.message) ?? [];
  }

  waitingCount(sessionId: string): number {
    return this.lanes.get(sessionId)?.waitingCount ?? 0;
  }

  runningTurn(sessionId: string): string | undefined {
    const turn = this.turns.get(sessionId);
    return turn && !turn.ended ? turn.id : undefined;
  }

  activeSessions(): string[] {
    return [...this.lanes.keys()];
  }

  /**
   * S3 / I5: stops the running turn when `turnId` matches (a mismatch is a full no-op, also with
   * `queued`); `queued` drops the waiting inputs too, archived after the turn or, when nothing
   * runs, at once (I6). Returns true while the matching turn has not settled.
   */
  approve(sessionId: string, callId: string, decision: ApprovalDecision): boolean {
    return this.ports.approvals?.decide(sessionId, callId, decision) ?? false;
  }

  approvals(sessionId: string): PendingApproval[] {
    return this.ports.approvals?.list(sessionId) ?? [];
  }

  abort(sessionId: string, options: AbortOptions = {}): boolean {
    const turn = this.turns.get(sessionId);
    const running = turn && !turn.ended ? turn : undefined;
    if (options.turnId !== undefined && options.turnId !== running?.id) return false;
    if (running?.abort({ by: options.by, reason: options.reason })) {
      this.ports.instrumentation?.stopped({
        sessionId,
        turnId: running.id,
        kind: 'abort',
        ...(options.by ? { by: options.by } : {}),
      });
    }
    if (options.queued) this.dropWaiting(sessionId, 'aborted', true);
    return !!running;
  }

  /**
   * Stops the session's running turn (no `by`) and drops its waiting inputs, then resolves once
   * the turn has settled. Clearing and deletion do not archive what they drop; shutdown does.
   */
  async stop(sessionId: string, reason: DropReason, why?: string): Promise<void> {
    const turn = this.turns.get(sessionId);
    this.dropWaiting(sessionId, reason, reason === 'shutdown');
    if (turn && !turn.ended && turn.abort({ reason: why ?? reason })) {
      this.ports.instrumentation?.stopped({ sessionId, turnId: turn.id, kind: stopKind(reason) });
    }
    if (turn) await turn.settled;
  }

  resume(): void {
    for (const sessionId of [...this.lanes.keys()]) {
      this.pump(sessionId);
      this.announce(sessionId);
    }
  }

  /**
   * Drops every waiting input of the session. Those to archive wait for the session's turn to
   * settle, so they land after its `agent:turn:after` in arrival order (I6); the others (clearing,
   * deletion) settle at once: nothing of theirs is written.
   */
  private dropWaiting(sessionId: string, reason: DropReason, archive: boolean): void {
    const lane = this.lanes.get(sessionId);
    const inputs = lane?.dropWaiting().map((i) => i.payload) ?? [];
    if (!inputs.length) return;
    this.announce(sessionId);
    const plan: DropPlan = { inputs, reason, archive };
    if (archive && this.turns.has(sessionId)) {
      this.afterTurn.set(sessionId, [...(this.afterTurn.get(sessionId) ?? []), plan]);
    } else {
      void this.carryOut(plan);
    }
  }

  /** Archives dropped inputs without turn id when asked, then settles them (I9). */
  private async carryOut(plan: DropPlan): Promise<void> {
    const archivable = plan.archive ? plan.inputs.filter((p) => isArchivable(p.message)) : [];
    if (archivable.length) {
      try {
        await this.ports.archive.append(archivable.map((p) => archivedInput(p.message)));
      } catch (error) {
        this.logger.error(
          `Could not archive ${plan.inputs.length} dropped input(s): ${String(error)}`,
        );
      }
    }
    const settlement: Settlement = { settled: 'dropped', reason: plan.reason };
    for (const input of plan.inputs) void settleInput(this.ports, input, settlement);
  }

  private pump(sessionId: string): void {
    const lane = this.lanes.get(sessionId);
    if (!lane || lane.running || this.admission.isHeld(sessionId)) return;
    const turnId = newId();
    const opened = lane.openNext(turnId);
    if (opened) this.start(sessionId, turnId, lane, opened);
    else if (lane.idle) this.lanes.delete(sessionId);
  }

  private start(
    sessionId: string,
    turnId: string,
    lane: SessionLane<PendingInput>,
    opened: LaneInput<PendingInput>[],
  ): void {
    const turn = new Turn(turnId, sessionId, opened[0].source);
    for (const input of opened) turn.add(input.payload);
    this.turns.set(sessionId, turn);
    const handle: LaneHandle = {
      takePending: () => {
        const taken = lane.takePending(turnId).map((i) => i.payload);
        if (taken.length) this.announce(sessionId);
        return taken;
      },
      closeInsertions: () => lane.closeInsertions(turnId),
    };
    this.runner.run(turn, handle).then(
      (end) => this.settle(turn, lane, end),
      (error: unknown) =>
        this.settle(turn, lane, { turnId, outcome: 'error', error: String(error) }),
    );
  }

  private async settle(
    turn: Turn,
    lane: SessionLane<PendingInput>,
    end: TurnConclusion,
  ): Promise<void> {
    turn.ended = true;
    const settlement: Settlement = end
      ? { settled: 'turn', ...end }
      : { settled: 'dropped', reason: 'blocked' };
    for (const member of turn.members) void settleInput(this.ports, member, settlement);
    // Drops made while these are being archived (the turn is still the session's) join the loop,
    // so none is left behind for a later turn.
    for (let plans = this.takePlans(turn.sessionId); plans.length;) {
      for (const plan of plans) await this.carryOut(plan);
      plans = this.takePlans(turn.sessionId);
    }
    lane.settle(turn.id);
    this.turns.delete(turn.sessionId);
    turn.markDone();
    this.pump(turn.sessionId);
    this.announce(turn.sessionId);
  }

  private takePlans(sessionId: string): DropPlan[] {
    const plans = this.afterTurn.get(sessionId) ?? [];
    this.afterTurn.delete(sessionId);
    return plans;
  }

  /**
   * Emits `agent:queue` when the waiting list changed since the last announcement (S8). Each
   * change adds, removes or empties, so length and first and last arrival tell a change apart
   * in constant time; the list is built only when somebody listens.
   */
  private announce(sessionId: string): void {
    const lane = this.lanes.get(sessionId);
    const key = lane?.waitingCount ? lane.waitingKey() : '';
    if ((this.announced.get(sessionId) ?? '') === key) return;
    if (key) this.announced.set(sessionId, key);
    else this.announced.delete(sessionId);
    if (!this.ports.events.hasListeners('agent:queue')) return;
    this.ports.events.emit('agent:queue', {
      sessionId,
      waiting: lane?.waitingPayloads((input) => input.message) ?? [],
    });
  }
}

/** What stopped a turn, as tracing names it. */
function stopKind(reason: DropReason): 'clear' | 'delete' | 'shutdown' | 'abort' {
  if (reason === 'cleared') return 'clear';
  if (reason === 'deleted') return 'delete';
  return reason === 'shutdown' ? 'shutdown' : 'abort';
}
