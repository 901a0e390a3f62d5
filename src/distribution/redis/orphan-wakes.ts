import { Logger } from '@nestjs/common';

/** The inbox as the sweep reads it: the unsettled inputs, of every session. */
export interface UnsettledSource {
  unsettled(): Promise<Array<{ sessionId: string }>>;
}

/** What the sweep asks and does. */
export interface OrphanWakeParts {
  inbox: UnsettledSource;
  /** The session's lease holder, if any (Redis). */
  holder(sessionId: string): Promise<unknown>;
  /** Whether this instance still runs or holds the session (its lane, its lease). */
  busyHere(sessionId: string): boolean;
  /** Adds the session's wake job, delayed by `delayMs`. */
  wake(sessionId: string, delayMs: number): Promise<void>;
  /** A lease: how long the wake is delayed, so the takeover sees the inputs as no longer on their way. */
  delayMs: number;
}

const logger = new Logger('Distribution');

/**
 * After Redis came back: wakes each session that has unsettled inputs in the inbox but that no
 * instance holds (no lease) and this one does not run. A Redis restarted without persistence
 * lost the pending lists and wake jobs of such inputs; with its data kept, the job is there
 * already and this one joins it (wake jobs are deduplicated by session). The wake is delayed by
 * a lease, so that the takeover (`InputRecovery.takeOver`) takes up inputs accepted before the
 * outage and not those on their way now. Resolves with the sessions woken; never rejects.
 */
export async function wakeOrphanedSessions(parts: OrphanWakeParts): Promise<string[]> {
  try {
    const sessions = [...new Set((await parts.inbox.unsettled()).map((e) => e.sessionId))];
    const woken: string[] = [];
    for (const sessionId of sessions) {
      if (parts.busyHere(sessionId) || (await parts.holder(sessionId)) !== undefined) continue;
      await parts.wake(sessionId, parts.delayMs);
      woken.push(sessionId);
    }
    if (woken.length) {
      logger.log(`Redis is back: woke ${woken.length} session(s) with inputs nobody holds`);
    }
    return woken;
  } catch (error) {
    logger.warn(
      `Redis is back, but waking sessions with unsettled inputs failed: ${String(error)}`,
    );
    return [];
  }
}

/** What {@link wakeDirectOrphans} uses. */
export interface DirectOrphanParts {
  leases: { sweepDirect(): Promise<string[]> };
  wake: { wake(sessionId: string, delayMs: number): Promise<void> };
  leaseMs: number;
}

/**
 * At every heartbeat: wakes the sessions taken where their input came (no wake job behind them,
 * so BullMQ redelivers nothing) whose lease expired without a release, their holder having died.
 * The first instance to sweep a session wakes it, a lease later, so that the takeover sees the
 * inputs the dead holder had taken as no longer on their way. Resolves with the sessions woken;
 * never rejects (Redis away: the sweep after its return finds them by their unsettled inputs).
 */
export async function wakeDirectOrphans(parts: DirectOrphanParts): Promise<string[]> {
  try {
    const orphaned = await parts.leases.sweepDirect();
    for (const sessionId of orphaned) await parts.wake.wake(sessionId, parts.leaseMs);
    if (orphaned.length) {
      logger.warn(`Woke ${orphaned.length} session(s) whose instance stopped while running them`);
    }
    return orphaned;
  } catch {
    return [];
  }
}
