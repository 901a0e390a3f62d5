/**
 * The Redis keys of distributed mode, all under one prefix (`AGENT_QUEUE_PREFIX`, default
 * `agent`), so that several deployments (or test runs) share a server without meeting. BullMQ's
 * own keys live under the same prefix (`<prefix>:wake:*`).
 */
export class RedisKeys {
  constructor(readonly prefix: string) {}

  /** The session's lease: `<instanceId>|<fence>`, with the lease's expiry. */
  lease(sessionId: string): string {
    return `${this.prefix}:lease:${sessionId}`;
  }

  /** The session's fencing counter: the last fence granted, only ever growing. */
  fence(sessionId: string): string {
    return `${this.prefix}:fence:${sessionId}`;
  }

  /**
   * The fence of the session's last grant that was let go cleanly (its lane idle, nothing of it
   * interrupted): a grant that follows it needs no takeover.
   */
  released(sessionId: string): string {
    return `${this.prefix}:released:${sessionId}`;
  }

  /**
   * The sessions whose lease was taken by the instance that received their input (no wake job
   * behind it; a sorted set, scored by when the lease runs out): a lease of them found expired
   * means its holder died, and the session is woken (`SessionLeases.sweepDirect`).
   */
  direct(): string {
    return `${this.prefix}:direct`;
  }

  /** The session's inputs on their way to the instance that runs it (a list). */
  pending(sessionId: string): string {
    return `${this.prefix}:pending:${sessionId}`;
  }

  /** The instance's mailbox stream. */
  mailbox(instanceId: string): string {
    return `${this.prefix}:mailbox:${instanceId}`;
  }

  /** Live instances: instance id -> the time (ms) of its last heartbeat. */
  instances(): string {
    return `${this.prefix}:instances`;
  }

  /** The kept stream of a turn, for clients that resume on another instance (a stream). */
  turnLog(turnId: string): string {
    return `${this.prefix}:turnlog:${turnId}`;
  }

  /** The session's latest turn: `{ turnId, source?, ended }` (JSON). */
  latestTurn(sessionId: string): string {
    return `${this.prefix}:turnlatest:${sessionId}`;
  }

  /** The ids of the session's turns whose logs may still be kept (a set). */
  sessionTurns(sessionId: string): string {
    return `${this.prefix}:turns:${sessionId}`;
  }

  /** The pub/sub channel of the events clients follow, from every instance. */
  events(): string {
    return `${this.prefix}:events`;
  }
}
