import { Logger } from '@nestjs/common';
import type { IncomingMessage, SessionLanes, Settlement } from '../../contracts';
import type { FenceStore } from './lease-taking';
import type { LeaseFencing } from './lease-fencing';
import type { PendingInput, PendingInputs } from './pending-inputs';
import type { LeaseGrant, SessionLeases } from './session-leases';
import type { WakeQueue } from './wake-queue';

/**
 * The engine's side of a takeover (`InputRecovery.takeOver`): closes the session's interrupted
 * turns and returns the inputs a previous holder's lane had taken (in arrival order), except
 * those on their way (in the pending list) or accepted less than `settledAfterMs` ago.
 */
export type SessionTakeover = (
  sessionId: string,
  onTheirWay: ReadonlySet<string>,
  settledAfterMs: number,
) => Promise<Array<IncomingMessage & { id: string }>>;

/** The origin of an input taken over from the inbox: not known (its caller finds the inbox). */
export const UNKNOWN_ORIGIN = '';

/** What the sessions this instance runs are run with. */
export interface HeldSessionsParts {
  /** This instance's id (the origin of the inputs it accepted). */
  instanceId: string;
  lanes: SessionLanes;
  leases: SessionLeases;
  fencing: LeaseFencing;
  fences: FenceStore;
  pending: PendingInputs;
  wake: WakeQueue;
  /** Where a settled input's settlement goes: to the instance where its caller waits. */
  route(input: PendingInput, settlement: Settlement): void;
  /** The takeover, once the application provides it (before that, none is done). */
  takeover(): SessionTakeover | undefined;
  /** The lease length (ms): inputs accepted longer ago than this are no longer on their way. */
  leaseMs: number;
  /** Sessions run here at once, taken by wake jobs or where their input came. */
  concurrency: number;
  /** Whether an idle session is run by the instance its input came to, when it has room. */
  runWhereReceived: boolean;
  /** Told how many sessions taken where their input came run here now (the worker makes room). */
  directRuns?(count: number): void;
}

/** A session this instance runs now, under its lease. */
export interface HeldSession {
  grant: LeaseGrant;
  /** Inputs entered into the lane, by id: the instances to tell of their settlement. */
  entered: Map<string, string[]>;
  /** How many entered inputs have not settled. */
  unsettled: number;
  /** Set when the lease was found lost: settlements are then the new holder's to give. */
  lost: boolean;
  /** The inbox did not take a settlement: the next holder must look (no clean release). */
  unrecorded: boolean;
  /** Drains of the pending list, one after another (S8: the list's order is the lane's). */
  draining: Promise<void>;
  /** Wakes the run loop: an input entered or settled. */
  changed: () => void;
  /** Found idle, being let go: a poke wakes the session instead of entering inputs here. */
  closing: boolean;
}

/**
 * One session's run on its holder, the part that wake jobs and sessions taken where their
 * input came share (`HeldSessions`): after the lease was taken and its fence claimed (so the
 * previous holder can write no more), the previous holder's leftovers are taken over unless it
 * let go cleanly, then the session's pending inputs are fed into the engine's lanes in list
 * order until the session is idle; then the lease is let go, and the session woken again if an
 * input came in the meantime.
 */
export class SessionRuns {
  protected readonly logger = new Logger('HeldSessions');
  protected readonly running = new Map<string, HeldSession>();
  /** Each session's run, until it has let its lease go (shutdown waits for them). */
  protected readonly runs = new Set<Promise<void>>();

  constructor(protected readonly parts: HeldSessionsParts) {}

  /**
   * Runs a session whose lease was taken and claimed, until it is idle; then lets go. `first`:
   * inputs taken from its pending list already (they enter after any taken over).
   */
  protected async runHeld(grant: LeaseGrant, first: PendingInput[] = []): Promise<void> {
    const run = this.runUntilLetGo(grant, first);
    this.runs.add(run);
    try {
      await run;
    } finally {
      this.runs.delete(run);
    }
  }

  private async runUntilLetGo(grant: LeaseGrant, first: PendingInput[]): Promise<void> {
    const sessionId = grant.sessionId;
    const session = this.open(grant);
    let clean = false;
    try {
      // After a clean release nothing was interrupted or left in the inbox: no takeover read.
      const checked =
        this.parts.leases.afterCleanRelease(sessionId) || (await this.takeOver(session));
      for (const input of first) this.enter(session, input); // drained already, in list order
      await this.untilIdle(session);
      clean = checked && !session.lost && !session.unrecorded && session.unsettled === 0;
    } finally {
      await this.letGo(session, clean);
    }
  }

  /**
   * After the lease was taken: the previous holder's interrupted turns are closed and the inputs
   * its lane had taken enter this one first, in order (their callers find the settlement in the
   * inbox). Whether it was done (not before the application provides the takeover).
   */
  protected async takeOver(session: HeldSession): Promise<boolean> {
    const takeover = this.parts.takeover();
    if (!takeover) return false;
    const { sessionId } = session.grant;
    const onTheirWay = new Set(await this.parts.pending.ids(sessionId));
    const taken = await takeover(sessionId, onTheirWay, this.parts.leaseMs);
    for (const message of taken) this.enter(session, { message, origin: UNKNOWN_ORIGIN });
    return true;
  }

  protected open(grant: LeaseGrant): HeldSession {
    const session: HeldSession = {
      grant,
      entered: new Map(),
      unsettled: 0,
      lost: false,
      unrecorded: false,
      draining: Promise.resolve(),
      changed: () => undefined,
      closing: false,
    };
    this.running.set(grant.sessionId, session);
    return session;
  }

  /** Drains and enters until every entered input settled and the lane is idle. */
  protected async untilIdle(session: HeldSession): Promise<void> {
    const { lanes } = this.parts;
    const sessionId = session.grant.sessionId;
    const idle = () =>
      session.unsettled === 0 &&
      lanes.runningTurn(sessionId) === undefined &&
      lanes.waitingCount(sessionId) === 0;
    for (;;) {
      const changed = new Promise<void>((resolve) => (session.changed = resolve));
      await this.drain(session);
      if (session.lost) return;
      if (idle()) {
        // Pokes stop entering inputs; a drain under way ends first (its inputs must run here).
        session.closing = true;
        await session.draining;
        if (idle() || session.lost) return;
        session.closing = false;
        continue;
      }
      await changed;
    }
  }

  /** Takes the session's pending inputs and enters them, after any drain still going. */
  protected drain(session: HeldSession): Promise<void> {
    const next = session.draining.then(async () => {
      const { sessionId, fence } = session.grant;
      const holder = { instanceId: this.parts.instanceId, fence };
      const inputs = await this.parts.pending.drain(sessionId, holder);
      for (const input of inputs) this.enter(session, input);
    });
    session.draining = next.catch((error: unknown) => {
      this.logger.error(`Taking up inputs failed: ${String(error)}`);
    });
    return session.draining;
  }

  /** Enters one input (once per id: a repeat only adds an instance to tell). */
  protected enter(session: HeldSession, input: PendingInput): void {
    const { id } = input.message;
    const origins = session.entered.get(id);
    if (origins) {
      if (!origins.includes(input.origin)) origins.push(input.origin);
      return;
    }
    const tell = [input.origin];
    session.entered.set(id, tell);
    // An input accepted elsewhere: its inbox entry's writes need not read its session (one
    // accepted here is known to the stores already).
    if (input.origin !== this.parts.instanceId) {
      this.parts.fencing.runs(id, session.grant.sessionId);
    }
    session.unsettled++;
    session.changed();
    const entered = this.parts.lanes.enterRecorded(input.message);
    void entered.settlement.then(async (settlement) => {
      session.entered.delete(id);
      if (!session.lost) {
        for (const origin of tell) {
          this.parts.route({ ...input, origin }, settlement);
        }
      }
      // Let go only once the inbox has the settlement (else the next takeover closes the ended
      // turn again); a failed record leaves the release unclean, so the next holder looks.
      if (!(await entered.recorded)) session.unrecorded = true;
      session.unsettled--;
      session.changed();
    });
  }

  /** Lets the lease go (`clean`: nothing interrupted, the next grant skips the takeover). */
  protected async letGo(session: HeldSession, clean: boolean): Promise<void> {
    const { sessionId } = session.grant;
    this.running.delete(sessionId);
    // The inputs waiting when the lease went are counted in the same round trip.
    const { pending } = await this.parts.leases
      .releaseCounting(session.grant, clean)
      .catch(() => ({ pending: undefined }));
    // A lost lease is let go while the lane may still run the old turn (a pause): its writes keep
    // the old fence, which the store refuses; this instance's next grant replaces it.
    if (!session.lost) this.parts.fencing.released(sessionId);
    if ((pending ?? (await this.parts.pending.length(sessionId))) > 0)
      await this.parts.wake.wake(sessionId);
  }
}
