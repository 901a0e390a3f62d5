/** The shapes of session leases (`SessionLeases`). */

/** A lease this instance was granted: the session and its fence. */
export interface LeaseGrant {
  sessionId: string;
  fence: number;
}

/** Who holds a session's lease, with the time (ms) the lease has left. */
export interface LeaseHolder {
  instanceId: string;
  fence: number;
  ttlMs: number;
}

/** Options of {@link SessionLeases}. */
export interface SessionLeasesOptions {
  /** Key prefix ({@link RedisKeys}). */
  prefix: string;
  /** This instance's id; may contain `|` (the value is parsed at its last `|`). */
  instanceId: string;
  /** A lease's time to live (ms), from each grant or renewal. */
  leaseMs: number;
  /** Called once for each grant found lost (taken, deleted, expired, or not renewed for leaseMs). */
  onLost?: (grant: LeaseGrant) => void;
  /** Renewal timer period (ms); default `leaseMs / 3`. */
  renewEveryMs?: number;
  /** The clock (ms) that measures how long a grant went unrenewed; default `Date.now`. */
  now?: () => number;
}
