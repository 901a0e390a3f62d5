import { Logger } from '@nestjs/common';
import type { DropReason, IncomingMessage, SessionLanes, Settlement } from '../../contracts';
import type { LeaseFencing } from './lease-fencing';
import type { PendingInput, PendingInputs } from './pending-inputs';
import type { LeaseGrant, SessionLeases } from './session-leases';
import type { WakeQueue } from './wake-queue';

/** The database side of a takeover: the session's newest fence, and claiming a newer one. */
export interface FenceStore {
  current(sessionId: string): Promise<number>;
  claim(sessionId: string, fence: number): Promise<boolean>;
}

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
}

/** A session this instance runs now, under its lease. */
interface HeldSession {
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

/** How a wake job for a session ended. */
export type RunOutcome = 'ran' | 'held-elsewhere' | 'running-here';

/**
 * The holder's side of distributed mode: the sessions this instance runs, each under its lease.
 * A wake job takes the lease (its fence never below the database's, and claimed there before
 * anything is read, so the previous holder can write no more), then feeds the session's pending
 * inputs into the engine's lanes in list order until the session is idle; then it lets go and
 * wakes the session again if an input came in the meantime.
 */
export class HeldSessions {
  private readonly logger = new Logger('HeldSessions');
  private readonly running = new Map<string, HeldSession>();

  constructor(private readonly parts: HeldSessionsParts) {}

  /** Whether this instance runs the session now. */
  holds(sessionId: string): boolean {
    return this.running.has(sessionId);
  }

  /** The sessions this instance runs now. */
  sessions(): string[] {
    return [...this.running.keys()];
  }

  /** The wake job of a session: runs it here until it is idle, unless another instance holds it. */
  async run(sessionId: string): Promise<RunOutcome> {
    if (this.running.has(sessionId)) return 'running-here';
    const grant = await this.take(sessionId);
    if (!grant) return 'held-elsewhere';
    const session = this.open(grant);
    let clean = false;
    try {
      // After a clean release nothing was interrupted or left in the inbox: no takeover read.
      const checked =
        this.parts.leases.afterCleanRelease(sessionId) || (await this.takeOver(session));
      await this.untilIdle(session);
      clean = checked && !session.lost && !session.unrecorded && session.unsettled === 0;
    } finally {
      await this.letGo(session, clean);
    }
    return 'ran';
  }

  /** New inputs for a session: entered if it runs here; otherwise woken if any wait. */
  async poke(sessionId: string): Promise<void> {
    const session = this.running.get(sessionId);
    if (session && !session.closing) await this.drain(session);
    else if ((await this.parts.pending.length(sessionId)) > 0)
      await this.parts.wake.wake(sessionId);
  }

  /**
   * Stops the session on this instance: its pending inputs are taken into the lane first (a
   * hold keeps them from opening a turn), then the lane stops its turn and drops them, settling
   * each. A session nobody holds but with inputs on their way is taken for it and let go after.
   * False when another instance holds the session (the caller asks that one).
   */
  async stop(sessionId: string, reason: DropReason, why?: string): Promise<boolean> {
    let session = this.running.get(sessionId);
    const took = !session;
    if (!session) {
      if (
        (await this.parts.pending.length(sessionId)) === 0 &&
        !this.parts.lanes.runningTurn(sessionId)
      ) {
        return (await this.parts.leases.holder(sessionId)) === undefined;
      }
      const grant = await this.take(sessionId);
      if (!grant) return false;
      session = this.open(grant);
    }
    // Taken only for the stop, without a takeover: clean only if the grant before was.
    const clean = took && this.parts.leases.afterCleanRelease(sessionId);
    await this.drain(session);
    await this.parts.lanes.stop(sessionId, reason, why);
    if (took) {
      while (session.unsettled > 0) {
        await new Promise<void>((resolve) => (session.changed = resolve));
      }
      await this.letGo(session, clean && !session.lost && !session.unrecorded);
    }
    return true;
  }

  /** The lease was found lost: the session's settlements are no longer this instance's. */
  lost(grant: LeaseGrant): void {
    const session = this.running.get(grant.sessionId);
    if (session && session.grant.fence === grant.fence) {
      session.lost = true;
      this.logger.warn(
        `Lost the lease of session ${JSON.stringify(grant.sessionId)} (fence ${grant.fence}): another instance takes it over`,
      );
      session.changed();
    }
  }

  /**
   * After the lease was taken: the previous holder's interrupted turns are closed and the inputs
   * its lane had taken enter this one first, in order (their callers find the settlement in the
   * inbox). Whether it was done (not before the application provides the takeover).
   */
  private async takeOver(session: HeldSession): Promise<boolean> {
    const takeover = this.parts.takeover();
    if (!takeover) return false;
    const { sessionId } = session.grant;
    const onTheirWay = new Set(await this.parts.pending.ids(sessionId));
    const taken = await takeover(sessionId, onTheirWay, this.parts.leaseMs);
    for (const message of taken) this.enter(session, { message, origin: UNKNOWN_ORIGIN });
    return true;
  }

  /**
   * Takes the lease and claims its fence in the database. Redis' fence counter is normally ahead
   * of the database's, so the database's fence is read (as the grant's floor) only when the claim
   * finds a newer one there (Redis lost its counter): one round trip less per idle-to-busy
   * transition.
   */
  private async take(sessionId: string): Promise<LeaseGrant | undefined> {
    const first = await this.grantClaimed(sessionId, 0);
    if (first !== 'stale') return first;
    const floor = await this.parts.fences.current(sessionId);
    const grant = await this.grantClaimed(sessionId, floor);
    if (grant !== 'stale') return grant;
    throw new Error(`stale lease fence for session ${JSON.stringify(sessionId)}`);
  }

  /** The lease granted above `floor` and its fence claimed; `'stale'` (let go) if refused. */
  private async grantClaimed(
    sessionId: string,
    floor: number,
  ): Promise<LeaseGrant | undefined | 'stale'> {
    const { leases, fences, fencing } = this.parts;
    const grant = await leases.acquire(sessionId, floor);
    if (!grant) return undefined;
    fencing.granted(grant);
    if (await fences.claim(sessionId, grant.fence)) return grant;
    // The database has seen a newer fence: this grant is stale (Redis lost its counter).
    await leases.release(grant);
    return 'stale';
  }

  private open(grant: LeaseGrant): HeldSession {
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
  private async untilIdle(session: HeldSession): Promise<void> {
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
  private drain(session: HeldSession): Promise<void> {
    const next = session.draining.then(async () => {
      const inputs = await this.parts.pending.drain(session.grant.sessionId);
      for (const input of inputs) this.enter(session, input);
    });
    session.draining = next.catch((error: unknown) => {
      this.logger.error(`Taking up inputs failed: ${String(error)}`);
    });
    return session.draining;
  }

  /** Enters one input (once per id: a repeat only adds an instance to tell). */
  private enter(session: HeldSession, input: PendingInput): void {
    const { id } = input.message;
    const origins = session.entered.get(id);
    if (origins) {
      if (!origins.includes(input.origin)) origins.push(input.origin);
      return;
    }
    const tell = [input.origin];
    session.entered.set(id, tell);
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
  private async letGo(session: HeldSession, clean: boolean): Promise<void> {
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
