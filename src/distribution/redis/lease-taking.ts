import type { LeaseFencing } from './lease-fencing';
import type { LeaseGrant, SessionLeases } from './session-leases';

/** The database side of a takeover: the session's newest fence, and claiming a newer one. */
export interface FenceStore {
  current(sessionId: string): Promise<number>;
  /** `flush: false`: a claim after a clean release need not wait for the disk (`SqlSessionFences`). */
  claim(sessionId: string, fence: number, options?: { flush?: boolean }): Promise<boolean>;
}

/** What a lease is taken with: Redis' leases, the stores' fencing and the database's fences. */
export interface LeaseTakingParts {
  leases: SessionLeases;
  fencing: LeaseFencing;
  fences: FenceStore;
}

/**
 * A grant made in Redis, its fence claimed in the database (the previous holder can write no
 * more); `'stale'` when the database has seen a newer fence (Redis lost its counter): the grant
 * is then let go.
 */
async function claimGrant(
  parts: LeaseTakingParts,
  grant: LeaseGrant,
): Promise<LeaseGrant | 'stale'> {
  const { leases, fences, fencing } = parts;
  fencing.granted(grant);
  const flush = !leases.afterCleanRelease(grant.sessionId);
  if (await fences.claim(grant.sessionId, grant.fence, { flush })) return grant;
  await leases.release(grant);
  return 'stale';
}

/**
 * Takes the session's lease and claims its fence in the database (undefined: another instance
 * holds it). Redis' fence counter is normally ahead of the database's, so the database's fence
 * is read (as the grant's floor) only when the claim finds a newer one there (Redis lost its
 * counter): one round trip less per idle-to-busy transition.
 */
export async function takeLease(
  parts: LeaseTakingParts,
  sessionId: string,
): Promise<LeaseGrant | undefined> {
  const first = await grantClaimed(parts, sessionId, 0);
  if (first !== 'stale') return first;
  const floor = await parts.fences.current(sessionId);
  const grant = await grantClaimed(parts, sessionId, floor);
  if (grant !== 'stale') return grant;
  throw new Error(`stale lease fence for session ${JSON.stringify(sessionId)}`);
}

/** The lease granted above `floor` and its fence claimed; `'stale'` (let go) if refused. */
async function grantClaimed(
  parts: LeaseTakingParts,
  sessionId: string,
  floor: number,
): Promise<LeaseGrant | undefined | 'stale'> {
  const grant = await parts.leases.acquire(sessionId, floor);
  return grant && claimGrant(parts, grant);
}
