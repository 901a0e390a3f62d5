import type {
  AbortOptions,
  Admission,
  ApprovalDecision,
  DispatchView,
  DropReason,
  HoldRelease,
  IncomingMessage,
  PendingApproval,
  SessionLanes,
  SessionLanesFactory,
  Settlement,
  WorkDispatcher,
} from '../../contracts';
import { HoldTable } from '../hold-table';
import {
  HeldSessions,
  type RunOutcome,
  type SessionTakeover,
  UNKNOWN_ORIGIN,
} from './held-sessions';
import { CrossInstanceHolds } from './cross-instance-holds';
import type { PendingInput, PushResult } from './pending-inputs';
import {
  ABORT,
  answerMailbox,
  APPROVALS,
  APPROVE,
  POKE,
  SETTLED,
  STATE,
  STOP,
  type ApproveBody,
  type HolderState,
} from './holder-requests';
import { wakeDirectOrphans } from './orphan-wakes';
import { RepeatedDeliveries } from './repeated-deliveries';
import { SettlementWaiters } from './settlement-waiters';
import type { DistributedDispatcherParts } from './dispatcher-parts';

/** How often a repeated delivery reads the inbox for its first delivery's settlement (ms). */
const REPEAT_POLL_MS = 200;

/**
 * The `WorkDispatcher` of distributed mode: a session's lane runs on the instance that holds its
 * lease, whichever instance took its inputs. An accepted input is pushed onto the session's
 * pending list (one order for every instance); the holder is poked through its mailbox, or, when
 * nobody holds the session, this instance takes it (if it has room) or adds one wake job for any
 * instance (`HeldSessions`). The settlement comes back to this instance through its mailbox.
 * Control goes to the holder: `abort`, `stop`, `approve`, `waiting`, `runningTurn`, `approvals`.
 * Holds (S4) are placed on every live instance before anything is stopped, and released on
 * every one; a hold whose instance is gone (no heartbeat) is forgotten, so no session stays held
 * by a dead instance. The synchronous `view` answers for sessions run here from the lanes, for
 * the others from what their holders published (`RemoteView`).
 */
export class DistributedDispatcher implements WorkDispatcher {
  readonly view: DispatchView;
  private readonly holds = new HoldTable();
  private readonly lanes: SessionLanes;
  private readonly held: HeldSessions;
  private readonly waiters = new SettlementWaiters();
  private readonly repeats: RepeatedDeliveries;
  private readonly crossHolds: CrossInstanceHolds;
  private takeover?: SessionTakeover;
  private readonly viewDue = new Set<string>();

  constructor(
    createLanes: SessionLanesFactory,
    private readonly parts: DistributedDispatcherParts,
  ) {
    const lanes = createLanes({ isHeld: (sessionId) => this.holds.isHeld(sessionId) });
    this.lanes = lanes;
    this.held = new HeldSessions({
      ...parts,
      lanes,
      route: (input, s) => this.route(input, s),
      takeover: () => this.takeover,
    });
    this.repeats = new RepeatedDeliveries({
      inbox: parts.inbox,
      wake: (sessionId) =>
        parts.leases.forgetCleanRelease(sessionId).then(() => parts.wake.wake(sessionId)),
      pollMs: Math.min(REPEAT_POLL_MS, parts.leaseMs),
      wakeAfterMs: parts.leaseMs,
    });
    this.crossHolds = new CrossInstanceHolds({
      ...parts,
      holds: this.holds,
      resume: () => lanes.resume(),
      stop: (id, reason, why) => this.stop(id, reason, why),
      runningHere: () => this.held.sessions(),
      pendingSessions: () => parts.pending.sessions(),
    });
    const remote = (sessionId: string) =>
      this.held.holds(sessionId) ? undefined : parts.remote.get(sessionId);
    this.view = {
      runningTurn: (sessionId) => lanes.runningTurn(sessionId) ?? remote(sessionId)?.runningTurn,
      waiting: (sessionId) => remote(sessionId)?.waiting ?? lanes.waiting(sessionId),
      waitingCount: (sessionId) =>
        remote(sessionId)?.waiting.length ?? lanes.waitingCount(sessionId),
      activeSessions: () => [...new Set([...lanes.activeSessions(), ...parts.remote.sessions()])],
      isHeld: (sessionId) => this.holds.isHeld(sessionId),
      holder: (sessionId) =>
        this.held.holds(sessionId) ? parts.instanceId : parts.remote.get(sessionId)?.holder,
    };
    this.listen();
  }

  /** This instance's id. */
  get instanceId(): string {
    return this.parts.instanceId;
  }

  /** Starts reading the mailbox and renewing leases. */
  async start(): Promise<void> {
    await this.parts.mailbox.start();
    await this.parts.remote.start();
    this.parts.leases.start();
    await this.parts.registry.start(() => {
      void this.crossHolds.forgetGone();
      void wakeDirectOrphans(this.parts);
      void this.waiters.checkOld(this.parts.inbox, this.parts.leaseMs);
      void this.parts.registry.live().then((live) => this.parts.remote.forgetGone(new Set(live)));
    });
  }

  /**
   * A session's turn started or ended, or its waiting list changed: once the current callbacks
   * ran, the states of every session that changed meanwhile go to the other instances' views
   * together, in one round trip (under load many fall in one turn of the event loop).
   */
  viewChanged(sessionId: string): void {
    if (this.viewDue.has(sessionId)) return;
    this.viewDue.add(sessionId);
    if (this.viewDue.size === 1) setImmediate(() => this.publishViews());
  }

  /** Publishes the state of every session whose view is due. */
  private publishViews(): void {
    const due = [...this.viewDue];
    this.viewDue.clear();
    this.parts.remote.publishFrom(due, this.lanes).catch(() => undefined);
  }

  /** Stops renewing leases and reading the mailbox; pending requests fail. */
  async close(): Promise<void> {
    this.repeats.close();
    this.parts.leases.stop();
    await this.parts.registry.stop();
    await this.parts.remote.close();
    await this.parts.mailbox.close();
  }

  /** The wake job of a session (the worker's processor calls it). */
  runWake(sessionId: string): Promise<RunOutcome> {
    return this.held.run(sessionId);
  }

  /** Provides the engine's takeover of a session (`InputRecovery.takeOver`). */
  setTakeover(takeover: SessionTakeover): void {
    this.takeover = takeover;
  }

  /** Called by the leases for each grant found lost. */
  leaseLost(grant: { sessionId: string; fence: number }): void {
    this.held.lost(grant);
  }

  async submit(message: IncomingMessage): Promise<Admission> {
    if (this.holds.isHeld(message.sessionId)) return { accepted: false, reason: 'held' };
    const id = message.id;
    if (id === undefined) throw new Error('a distributed input needs its id');
    const settlement = this.waiters.wait(id);
    const input: PendingInput = { message: { ...message, id }, origin: this.instanceId };
    let pushed: PushResult;
    const { sessionId } = message;
    const sentAt = this.parts.leases.clock();
    try {
      // One round trip: a holder elsewhere is poked, an idle session taken here if there is room.
      const letter = this.parts.mailbox.letter(POKE, { sessionId });
      const takeForMs = this.held.room() ? this.parts.leaseMs : undefined;
      const push = () => this.parts.pending.push(input, letter, takeForMs);
      pushed = await this.guard('the input was not accepted', push);
    } catch (error) {
      this.waiters.forget(id); // not on its way: the caller hears of it (`RedisUnavailableError`)
      throw error;
    }
    // On its way from now on (the list has it): running or telling the holder is the rest of the
    // job, and a failure there falls back to waking the session, never to refusing the input.
    const wake = () => this.parts.wake.wake(sessionId).catch(() => undefined);
    if (pushed.granted) void this.held.runTaken(sessionId, pushed.granted, sentAt).catch(wake);
    else if (!pushed.poked) await this.tell(sessionId, pushed.holder).catch(wake);
    return { accepted: true, settlement };
  }

  /** Tells the session's holder of new inputs, or wakes the session when nobody holds it. */
  private async tell(sessionId: string, holder: string | undefined): Promise<void> {
    if (holder === this.instanceId) await this.held.poke(sessionId);
    else if (holder) await this.parts.mailbox.send(holder, POKE, { sessionId });
    else await this.parts.wake.wake(sessionId);
  }

  whenFree(sessionId: string, signal?: AbortSignal): Promise<void> {
    return this.holds.whenFree(sessionId, signal);
  }

  hold(sessionIds: readonly string[] | undefined, why?: string): Promise<HoldRelease> {
    const hold = () => this.crossHolds.hold(sessionIds, why);
    return this.guard('the sessions could not be held', hold);
  }

  async abort(sessionId: string, options: AbortOptions): Promise<boolean> {
    if (this.held.holds(sessionId)) return this.lanes.abort(sessionId, options);
    return (await this.ask<boolean>(sessionId, ABORT, { sessionId, options })) ?? false;
  }

  /** Decides the call where it waits: here, else on the session's holder (`false`: nowhere). */
  async approve(sessionId: string, callId: string, decision: ApprovalDecision): Promise<boolean> {
    if (this.lanes.approve(sessionId, callId, decision)) return true;
    if (this.held.holds(sessionId)) return false;
    const body: ApproveBody = { sessionId, callId, decision };
    return (await this.ask<boolean>(sessionId, APPROVE, body)) ?? false;
  }

  async approvals(sessionId: string): Promise<PendingApproval[]> {
    if (this.held.holds(sessionId)) return this.lanes.approvals(sessionId);
    return (await this.ask<PendingApproval[]>(sessionId, APPROVALS, { sessionId })) ?? [];
  }

  stop(sessionId: string, reason: DropReason, why?: string): Promise<void> {
    // Here (held here, or taken for it), or where it is held; a holder gone meanwhile: again.
    return this.guard('the session was not stopped', async () => {
      for (let attempt = 0; attempt < 3; attempt++) {
        if (await this.held.stop(sessionId, reason, why)) return;
        const answered = await this.ask(sessionId, STOP, { sessionId, reason, why });
        if (answered !== undefined) return;
      }
    });
  }

  /** See `WorkDispatcher.repeat`: follows the first delivery's settlement in the inbox. */
  repeat(message: IncomingMessage & { id: string }): Promise<Settlement> {
    return this.repeats.follow(message);
  }

  async drain(): Promise<void> {
    this.repeats.close();
    this.held.stopTaking();
    const stop = (id: string) => this.lanes.stop(id, 'shutdown', 'shutdown');
    await Promise.all(this.held.sessions().map(stop));
    await this.held.whenAllLetGo();
  }

  async waiting(sessionId: string): Promise<IncomingMessage[]> {
    if (this.held.holds(sessionId)) return this.lanes.waiting(sessionId);
    return (await this.ask<HolderState>(sessionId, STATE, { sessionId }))?.waiting ?? [];
  }

  async runningTurn(sessionId: string): Promise<string | undefined> {
    if (this.held.holds(sessionId)) return this.lanes.runningTurn(sessionId);
    return (await this.ask<HolderState>(sessionId, STATE, { sessionId }))?.runningTurn;
  }

  activeSessions = (): Promise<string[]> => Promise.resolve(this.view.activeSessions());

  /** Sends a settlement where its caller waits (Redis away: the caller finds it in the inbox). */
  private route(input: PendingInput, settlement: Settlement): void {
    if (input.origin === this.instanceId || input.origin === UNKNOWN_ORIGIN) {
      this.waiters.settle(input.message.id, settlement);
      return;
    }
    const body = { id: input.message.id, settlement };
    this.parts.mailbox.send(input.origin, SETTLED, body).catch(() => undefined);
  }

  /** A control request to the session's holder; `undefined` when nobody holds it. */
  private ask<R>(sessionId: string, type: string, body: unknown): Promise<R | undefined> {
    const { leases, mailbox, requestTimeoutMs } = this.parts;
    return this.guard(`the ${type} request did not reach the session's instance`, async () => {
      const holder = await leases.holder(sessionId);
      return holder && mailbox.request<R>(holder.instanceId, type, body, requestTimeoutMs);
    });
  }

  /** Redis work through the health's guard (at once `RedisUnavailableError` when Redis is away). */
  private guard<T>(consequence: string, operation: () => Promise<T>): Promise<T> {
    return this.parts.health?.guard(consequence, operation) ?? operation();
  }

  private listen(): void {
    answerMailbox(this.parts.mailbox, this.lanes, {
      poke: (sessionId) => this.held.poke(sessionId),
      settled: (id, settlement) => this.waiters.settle(id, settlement),
      abort: (sessionId, options) =>
        this.held.holds(sessionId) && this.lanes.abort(sessionId, options),
      stop: (sessionId, reason, why) => this.held.stop(sessionId, reason, why),
    });
  }
}
