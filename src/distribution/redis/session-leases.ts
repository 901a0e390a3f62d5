import type Redis from 'ioredis';
import { defineLeaseCommands, LeaseCommands, leaseValue, parseLeaseValue } from './lease-scripts';
import { RedisKeys } from './redis-keys';
import type { LeaseGrant, LeaseHolder, SessionLeasesOptions } from './lease-types';

export type { LeaseGrant, LeaseHolder, SessionLeasesOptions } from './lease-types';

/** How long a clean release is remembered (ms): a session idle longer gets a takeover check. */
const CLEAN_MARK_MS = 24 * 60 * 60 * 1000;

/** A grant as this instance keeps it: the lease value, and when it was last known renewed. */
interface Held {
  grant: LeaseGrant;
  value: string;
  /** The grant before it was let go cleanly: nothing of the session is left to take over. */
  afterClean: boolean;
  /** When the last successful grant or renewal was sent (by `now`). */
  renewedAt: number;
}

/**
 * Session leases of distributed mode: at most one instance runs a session, the one holding its
 * lease in Redis. Every grant carries a fencing number that only grows, so a store can refuse
 * writes from an older holder. One instance's leases on one Redis client (the caller's): the
 * grants it believes it holds, renewed all in one script call; those found lost (or refused by
 * a store, `lose`) are reported through `onLost`, once each. Each operation is one round trip.
 */
export class SessionLeases {
  private readonly keys: RedisKeys;
  private readonly redis: Redis;
  private readonly commands: LeaseCommands;
  private readonly now: () => number;
  private readonly grants = new Map<string, Held>();
  private readonly acquiring = new Map<string, Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;
  private renewing = false;

  /** Defines the lease scripts on `redis` (under names of their own). */
  constructor(
    redis: Redis,
    private readonly options: SessionLeasesOptions,
  ) {
    if (!(options.leaseMs > 0)) throw new Error('leaseMs must be positive');
    this.keys = new RedisKeys(options.prefix);
    this.now = options.now ?? Date.now;
    this.redis = redis;
    this.commands = defineLeaseCommands(redis);
  }

  /**
   * Grants the session's lease: SET NX PX, then the next fence (never below `floor + 1`, the
   * store's last seen fence, so a Redis that lost its data cannot grant an old fence again),
   * stored as `<instanceId>|<fence>`. Re-entrant: when this instance holds it, the same grant,
   * extended (`floor` is then not consulted). Undefined when another instance holds it. A grant
   * this instance believed it held and finds replaced is reported lost. Calls for one session
   * run one after another, so concurrent calls of one instance get the same grant.
   */
  async acquire(sessionId: string, floor = 0): Promise<LeaseGrant | undefined> {
    if (!Number.isSafeInteger(floor) || floor < 0) throw new Error(`Bad fence floor: ${floor}`);
    const previous = this.acquiring.get(sessionId)?.catch(() => undefined);
    const run = (previous ?? Promise.resolve()).then(() => this.grant(sessionId, floor));
    this.acquiring.set(sessionId, run);
    try {
      return await run;
    } finally {
      if (this.acquiring.get(sessionId) === run) this.acquiring.delete(sessionId);
    }
  }

  /**
   * Compare-and-delete: deletes the lease only if its value is still this grant's; whether it did.
   * Forgets the grant locally either way. `clean` (recorded only when the lease was still this
   * grant's): the lane is idle, nothing interrupted or left, so the next grant needs no takeover.
   */
  async release(grant: LeaseGrant, clean = false): Promise<boolean> {
    return (await this.releaseCounting(grant, clean)).released;
  }

  /**
   * `release`, and in the same round trip how many inputs wait in the session's pending list at
   * that moment (the holder wakes the session again if any do).
   */
  async releaseCounting(
    grant: LeaseGrant,
    clean = false,
  ): Promise<{ released: boolean; pending: number }> {
    const own = this.grants.get(grant.sessionId);
    if (own?.grant.fence === grant.fence) this.grants.delete(grant.sessionId);
    const value = leaseValue(this.options.instanceId, grant.fence);
    const [deleted, pending] = await this.commands.agentLeaseRelease(
      this.keys.lease(grant.sessionId),
      this.keys.released(grant.sessionId),
      this.keys.pending(grant.sessionId),
      this.keys.direct(),
      value,
      grant.fence,
      clean ? '1' : '0',
      CLEAN_MARK_MS,
      grant.sessionId,
    );
    return { released: deleted === 1, pending };
  }

  /** Whether this instance's grant followed a clean release (`release`): nothing to take over. */
  afterCleanRelease(sessionId: string): boolean {
    return this.grants.get(sessionId)?.afterClean ?? false;
  }

  /**
   * Forgets that the session was let go cleanly, so that its next grant takes it over (reads
   * the inbox): for inputs found on no instance's way (a repeated delivery waiting in vain, a
   * Redis that came back). A holder that lets go cleanly afterwards marks it again.
   */
  async forgetCleanRelease(sessionId: string): Promise<void> {
    await this.redis.del(this.keys.released(sessionId));
  }

  /**
   * Records a grant that the push of an input made in Redis (the session was idle and this
   * instance had room, `PendingInputs.push`), as `acquire` records its own: renewed, released
   * and reported lost alike. `sentAt`: `clock()` when the push was sent.
   */
  adopt(sessionId: string, fence: number, clean: boolean, sentAt: number): LeaseGrant {
    const current = this.grants.get(sessionId);
    const replaced = current ? this.forget([current]) : [];
    const value = leaseValue(this.options.instanceId, fence);
    const grant = { sessionId, fence };
    this.grants.set(sessionId, { grant, value, afterClean: clean, renewedAt: sentAt });
    this.report(replaced);
    return { ...grant };
  }

  /** The clock that grants are timed by (`adopt`'s `sentAt`). */
  readonly clock = (): number => this.now();

  /**
   * The sessions taken where their input came (`adopt`) whose lease is gone without a release:
   * their holder died and no wake job stands behind them. Removed from the direct set (by
   * whichever instance sweeps first) and returned, to be woken.
   */
  sweepDirect(): Promise<string[]> {
    const { keys, options } = this;
    return this.commands.agentLeaseSweepDirect(keys.direct(), keys.lease(''), options.leaseMs);
  }

  /** Who holds the session now (GET and PTTL in one script), or undefined. */
  async holder(sessionId: string): Promise<LeaseHolder | undefined> {
    const found = await this.commands.agentLeaseHolder(this.keys.lease(sessionId));
    if (!found) return undefined;
    return { ...parseLeaseValue(found[0]), ttlMs: Number(found[1]) };
  }

  /** A store refused a write of `fence` (a newer one was claimed): that grant or an older is lost. */
  lose(sessionId: string, fence: number): void {
    const held = this.grants.get(sessionId);
    if (held && held.grant.fence <= fence) this.report(this.forget([held]));
  }

  /** The grants this instance believes it holds. */
  held(): LeaseGrant[] {
    return [...this.grants.values()].map((h) => ({ ...h.grant }));
  }

  /** This instance's grant of the session, if it believes it holds one. */
  grantOf(sessionId: string): LeaseGrant | undefined {
    const own = this.grants.get(sessionId);
    return own && { ...own.grant };
  }

  /**
   * Renews every held lease in one script call (PEXPIRE only where the value is still ours);
   * grants found lost are forgotten and reported through `onLost`, once each. Resolves with the
   * lost grants. When the call fails, grants not renewed for `leaseMs` are reported lost all the
   * same (another instance may hold them by then), and the call's error is rethrown.
   */
  async renewAll(): Promise<LeaseGrant[]> {
    const batch = [...this.grants.values()];
    if (batch.length === 0) return [];
    const sentAt = this.now();
    let answers: number[];
    try {
      answers = await this.commands.agentLeaseRenew(
        batch.length,
        ...batch.map((h) => this.keys.lease(h.grant.sessionId)),
        this.options.leaseMs,
        ...batch.map((h) => h.value),
      );
    } catch (error) {
      this.expireOverdue();
      throw error;
    }
    const lost: Held[] = [];
    batch.forEach((h, i) => {
      if (this.grants.get(h.grant.sessionId) !== h) return; // released or replaced meanwhile
      if (answers[i] === 1) h.renewedAt = sentAt;
      else lost.push(h);
    });
    return this.report(this.forget(lost));
  }

  /**
   * Starts the renewal timer (unref'd; idempotent). A failed renewal is retried at the next
   * tick; a grant not renewed successfully for `leaseMs` is reported lost without waiting for
   * an answer from Redis.
   */
  start(): void {
    if (this.timer) return;
    const every = this.options.renewEveryMs ?? this.options.leaseMs / 3;
    this.timer = setInterval(() => this.tick(), Math.max(1, every));
    this.timer.unref();
  }

  /** Stops the renewal timer; the grants are kept (and expire in Redis unless renewed). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One timer tick: overdue grants lost, then one renewal unless the last is still waiting. */
  private tick(): void {
    try {
      this.expireOverdue();
    } catch {
      // an exception of onLost's own; every overdue grant was reported all the same
    }
    if (this.renewing) return;
    this.renewing = true;
    this.renewAll()
      .catch(() => undefined) // retried at the next tick; overdue grants are reported there
      .finally(() => (this.renewing = false));
  }

  /** Runs the acquire script for a session and records the outcome locally. */
  private async grant(sessionId: string, floor: number): Promise<LeaseGrant | undefined> {
    const own = this.grants.get(sessionId);
    const { instanceId, leaseMs } = this.options;
    const sentAt = this.now();
    const answer = await this.commands.agentLeaseAcquire(
      this.keys.lease(sessionId),
      this.keys.fence(sessionId),
      this.keys.released(sessionId),
      instanceId,
      leaseMs,
      floor,
      own?.value ?? '',
    );
    const fence = answer === null ? null : Number(answer[0]);
    const current = this.grants.get(sessionId);
    const replaced = current && current.grant.fence !== fence ? this.forget([current]) : [];
    let next = this.grants.get(sessionId);
    // A re-entrant grant says nothing of how the run before it ended: no clean release assumed.
    if (next) next.afterClean = false;
    if (fence !== null) {
      next ??= {
        grant: { sessionId, fence },
        value: leaseValue(instanceId, fence),
        afterClean: Number(answer![1]) === 1,
        renewedAt: sentAt,
      };
      next.renewedAt = sentAt;
      this.grants.set(sessionId, next);
    }
    this.report(replaced);
    return next && { ...next.grant };
  }

  /** Grants not renewed successfully for `leaseMs`: forgotten and reported lost. */
  private expireOverdue(): LeaseGrant[] {
    const deadline = this.now() - this.options.leaseMs;
    return this.report(
      this.forget([...this.grants.values()].filter((h) => h.renewedAt <= deadline)),
    );
  }

  /** Forgets the grants that are still held as given; returns them. */
  private forget(lost: Held[]): LeaseGrant[] {
    const gone = lost.filter((h) => this.grants.get(h.grant.sessionId) === h);
    for (const h of gone) this.grants.delete(h.grant.sessionId);
    return gone.map((h) => ({ ...h.grant }));
  }

  /**
   * Reports lost grants through `onLost`; an exception from `onLost` does not stop the others
   * being reported, and the first is rethrown after.
   */
  private report(lost: LeaseGrant[]): LeaseGrant[] {
    const errors: unknown[] = [];
    for (const grant of lost) {
      try {
        this.options.onLost?.({ ...grant });
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length) throw errors[0];
    return lost;
  }
}
