/**
 * One agent event as it crosses instances: its name on the event bus and its payload (plain
 * JSON: the events of a turn's stream, replies, usage reports, waiting lists, deletions).
 */
export interface RelayedEvent {
  name: string;
  event: { sessionId: string; turnId?: string; seq?: number } & object;
}

/** A session's latest turn, as the instance that ran it last told. */
export interface RelayedLatestTurn {
  turnId: string;
  /** The source of the input that opened it (absent: a human input). */
  source?: string;
  ended: boolean;
}

/**
 * Distributed mode: the events that clients follow, carried between instances in the order each
 * instance emitted them, and the streams of turns kept in Redis for clients that resume on
 * another instance (README, "Resuming a turn's stream").
 */
export interface EventRelay {
  /**
   * Sends an event emitted here to the other instances (batched per tick, one message per
   * batch, in order). An event of a turn's stream (with `turnId` and `seq`) is also appended to
   * its turn's log, kept while the turn runs and for the replay TTL after its end. Never throws.
   */
  publish(name: string, event: RelayedEvent['event']): void;
  /** Listens to the events of the other instances, in the order each emitted them. */
  onRemote(listener: (item: RelayedEvent) => void): () => void;
  /** The kept stream of a turn, in `seq` order (empty when none is kept). */
  turnLog(turnId: string): Promise<RelayedEvent[]>;
  /**
   * Whether Redis knows the turn as one of the session's (its start was relayed, the session was
   * not deleted since, and it ran within the last 30 min).
   */
  hasTurn(sessionId: string, turnId: string): Promise<boolean>;
  /** The session's latest turn: running, or ended within the replay TTL. */
  latestTurn(sessionId: string): Promise<RelayedLatestTurn | undefined>;
  /** Sends what is batched now; resolves once Redis has it. */
  flush(): Promise<void>;
  close(): Promise<void>;
}
