import type { DropReason } from '../../contracts';
import { takeLease } from './lease-taking';
import type { LeaseGrant } from './session-leases';
import { SessionRuns } from './session-runs';

export type { FenceStore } from './lease-taking';
export { type HeldSessionsParts, type SessionTakeover, UNKNOWN_ORIGIN } from './session-runs';

/** A grant the push of an input made (`PushResult.granted`). */
export type TakenGrant = { fence: number; clean: boolean };

/** How a wake job for a session ended. */
export type RunOutcome = 'ran' | 'held-elsewhere' | 'running-here' | 'busy';

/**
 * The holder's side of distributed mode: the sessions this instance runs, each under its lease.
 * A session is taken by a wake job (the lease acquired, its fence never below the database's)
 * or, when its input came here while it was idle and this instance had room, by the push of
 * that input (`runTaken`: no job). Either way its fence is claimed in the database before
 * anything is read, so the previous holder can write no more, and it runs as `SessionRuns`
 * says until it is idle.
 */
export class HeldSessions extends SessionRuns {
  /** Sessions taken where their input came whose fence is being claimed. */
  private readonly opening = new Map<string, Promise<unknown>>();
  private direct = 0;
  private taking = true;

  /** Whether this instance runs the session now (or is about to: its fence is being claimed). */
  holds(sessionId: string): boolean {
    return this.running.has(sessionId) || this.opening.has(sessionId);
  }

  /** Whether an idle session whose input came here is to be taken here (`runTaken`). */
  room(): boolean {
    const { runWhereReceived, concurrency } = this.parts;
    return this.taking && runWhereReceived && this.running.size + this.opening.size < concurrency;
  }

  /** Takes no more sessions where their input came (shutdown). */
  stopTaking(): void {
    this.taking = false;
  }

  /**
   * Resolves once every session run here now has let its lease go. Shutdown waits for it after
   * stopping the lanes, so the leases are released cleanly before Redis closes (and no run drains
   * on a closed connection).
   */
  async whenAllLetGo(): Promise<void> {
    await Promise.allSettled([...this.opening.values()]);
    await Promise.allSettled([...this.runs]);
  }

  /**
   * A session whose lease the push of its input took for this instance (it was idle and this
   * instance had room): its fence claimed, it runs here until idle, as a wake job's would. A
   * stale grant (Redis lost its fence counter) or one that comes while this instance still lets
   * an earlier grant go is handed to a wake job; a failure rejects (the caller wakes the session).
   */
  async runTaken(sessionId: string, granted: TakenGrant, sentAt: number): Promise<void> {
    const { leases, wake } = this.parts;
    const grant = leases.adopt(sessionId, granted.fence, granted.clean, sentAt);
    if (this.holds(sessionId)) {
      await leases.release(grant);
      return wake.wake(sessionId);
    }
    this.parts.fencing.granted(grant);
    const claiming = this.parts.fences.claim(sessionId, grant.fence, { flush: !granted.clean });
    // A clean grant takes nothing over: its list is drained while its fence is claimed.
    const holder = { instanceId: this.parts.instanceId, fence: grant.fence };
    const draining = granted.clean
      ? this.parts.pending.drain(sessionId, holder)
      : Promise.resolve([]);
    const opening = Promise.allSettled([claiming, draining]);
    this.opening.set(sessionId, opening);
    this.countDirect(1);
    try {
      const [claim, drained] = await opening;
      const first = drained.status === 'fulfilled' ? drained.value : [];
      if (claim.status === 'rejected' || !claim.value) {
        // Not claimed (the database away, or a newer fence there: the grant is stale): the inputs
        // go back to the head of the list before the lease goes, for the wake job after this.
        await this.parts.pending.restore(sessionId, first);
        await leases.release(grant).catch(() => false);
        if (claim.status === 'rejected') throw claim.reason;
        return await wake.wake(sessionId);
      }
      this.opening.delete(sessionId);
      // Opens the session at once, in this tick: `holds` stays true throughout.
      await this.runHeld(grant, first);
    } finally {
      this.opening.delete(sessionId);
      this.countDirect(-1);
    }
  }

  private countDirect(by: number): void {
    this.direct += by;
    this.parts.directRuns?.(this.direct);
  }

  /** The sessions this instance runs now. */
  sessions(): string[] {
    return [...this.running.keys(), ...this.opening.keys()];
  }

  /**
   * The wake job of a session: runs it here until it is idle, unless another instance holds it
   * or every slot here is taken (`busy`).
   */
  async run(sessionId: string): Promise<RunOutcome> {
    if (this.holds(sessionId)) return 'running-here';
    // Sessions taken where their input came fill the slots too (the worker then takes fewer).
    if (this.running.size + this.opening.size >= this.parts.concurrency) return 'busy';
    const grant = await takeLease(this.parts, sessionId);
    if (!grant) return 'held-elsewhere';
    await this.runHeld(grant);
    return 'ran';
  }

  /** New inputs for a session: entered if it runs here; otherwise woken if any wait. */
  async poke(sessionId: string): Promise<void> {
    if (this.opening.has(sessionId)) return; // its run drains the list once it opens
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
    while (this.opening.has(sessionId)) await this.opening.get(sessionId)?.catch(() => undefined);
    let session = this.running.get(sessionId);
    const took = !session;
    if (!session) {
      if (
        (await this.parts.pending.length(sessionId)) === 0 &&
        !this.parts.lanes.runningTurn(sessionId)
      ) {
        return (await this.parts.leases.holder(sessionId)) === undefined;
      }
      const grant = await takeLease(this.parts, sessionId);
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
    void this.stopIfTakenOver(grant);
  }

  /**
   * After a lease was lost: when the database has seen a newer fence (another instance took the
   * session over, and runs its inputs again), the turn this instance still runs for it is
   * stopped. Every write of it would be refused, so the rest of its model call and any tool call
   * it would make are work for nothing, done twice. Its lane's waiting inputs stay (they open
   * turns whose first write is refused, and run on the new holder). Without a newer fence
   * (nobody took the session over: Redis away, a pause nobody noticed) the turn goes on, and
   * its writes count.
   */
  private async stopIfTakenOver(grant: LeaseGrant): Promise<void> {
    const { lanes, fences } = this.parts;
    const turnId = lanes.runningTurn(grant.sessionId);
    if (turnId === undefined) return;
    const newest = await fences.current(grant.sessionId).catch(() => 0);
    if (newest <= grant.fence) return;
    // Taken again by this instance meanwhile: the newer fence is its own, and so is the turn.
    if ((this.parts.leases.grantOf(grant.sessionId)?.fence ?? 0) >= newest) return;
    const stopped = lanes.abort(grant.sessionId, {
      turnId,
      reason: `lease lost: another instance took the session over (fence ${newest})`,
    });
    if (stopped) {
      this.logger.warn(
        `Stopped turn ${turnId} of session ${JSON.stringify(grant.sessionId)}: another instance took the session over (fence ${newest} after ${grant.fence})`,
      );
    }
  }
}
