import type { AgentEventMap, StreamEvent, TokenUsageEvent } from '../../contracts';

/** The agent events that make up a turn's stream (`TurnStreamPosition`), numbered by `seq`. */
export type TurnStreamEventMap = Pick<
  AgentEventMap,
  'agent:turn:start' | 'outbound:stream' | 'tool:execute' | 'agent:turn:end'
>;

/** The name of an event of a turn's stream. */
export type TurnStreamEventName = keyof TurnStreamEventMap;

/** One event of a turn's stream, as replayed: its name and the agent's payload. */
export type TurnStreamEntry = {
  [K in TurnStreamEventName]: { name: K; event: TurnStreamEventMap[K] };
}[TurnStreamEventName];

/** What a backfill takes: events of a turn's stream, and its usage reports. */
export type BackfillEntry = TurnStreamEntry | { name: 'token:usage'; event: TokenUsageEvent };

/** How long an ended turn's stream stays resumable (ms). */
export const REPLAY_TTL_MS = 60_000;
/** Most events kept per turn: its last ones. */
export const REPLAY_MAX_EVENTS_PER_TURN = 10_000;
/** Most turns kept at once: past it the turn first seen longest ago is dropped. */
export const REPLAY_MAX_TURNS = 1_000;

/** Bounds of a {@link TurnReplayBuffer}. */
export interface TurnReplayOptions {
  /** @default REPLAY_TTL_MS (60 s) */
  ttlMs?: number;
  /** @default REPLAY_MAX_EVENTS_PER_TURN */
  maxEventsPerTurn?: number;
  /** @default REPLAY_MAX_TURNS */
  maxTurns?: number;
}

/**
 * What a resume gets: the events after `afterSeq` in order (`ended` once the turn's end is
 * among the kept ones; `usage`, the turn's latest usage report, not numbered), or why it cannot have them: `unknown` (no such turn of that session
 * here, or it ended more than the TTL ago) or `incomplete` (some of the events it needs were
 * dropped: past the per-turn bound, or never seen here).
 */
export type ReplayResult =
  | { status: 'ok'; entries: TurnStreamEntry[]; ended: boolean; usage?: TokenUsageEvent }
  | { status: 'unknown' }
  | { status: 'incomplete' };

/**
 * The kept stream of one turn: a ring of its last events (names and payloads in two arrays,
 * so recording allocates nothing per event once the arrays have grown).
 */
class TurnLog {
  readonly names: TurnStreamEventName[] = [];
  readonly events: TurnStreamEventMap[TurnStreamEventName][] = [];
  /** Index of the oldest kept event once the ring is full. */
  head = 0;
  /** `seq` of the oldest kept event. */
  firstSeq: number;
  /** `seq` of the newest kept event. */
  lastSeq: number;
  ended = false;
  /** The turn's latest usage report (a snapshot: only the latest is kept). */
  usage?: TokenUsageEvent;
  expiry?: NodeJS.Timeout;

  constructor(
    readonly sessionId: string,
    seq: number,
  ) {
    this.firstSeq = seq;
    this.lastSeq = seq - 1;
  }

  /** Forgets every kept event; the next one kept is `seq`. */
  restartAt(seq: number): void {
    this.names.length = 0;
    this.events.length = 0;
    this.head = 0;
    this.firstSeq = seq;
    this.lastSeq = seq - 1;
  }
}

/**
 * Keeps the stream of each running turn, and of each ended turn for `ttlMs` after its end, so a
 * client that lost its connection can get what it missed (README, "Resuming a turn's stream").
 * Recording is O(1) per event and never throws at the turn that emits. Bounded: a turn keeps
 * its last `maxEventsPerTurn` events, and at most `maxTurns` turns are kept; a resume that needs
 * a dropped event answers `incomplete`, one of a dropped turn `unknown`. Events without `turnId`
 * or `seq` are not part of a turn's stream and are ignored; a gap in a turn's `seq` (events not
 * seen here) makes what came before it unreachable, as if dropped.
 */
export class TurnReplayBuffer {
  private readonly turns = new Map<string, TurnLog>();
  private readonly ttlMs: number;
  private readonly maxEvents: number;
  private readonly maxTurns: number;

  constructor(options: TurnReplayOptions = {}) {
    this.ttlMs = options.ttlMs ?? REPLAY_TTL_MS;
    this.maxEvents = Math.max(1, options.maxEventsPerTurn ?? REPLAY_MAX_EVENTS_PER_TURN);
    this.maxTurns = Math.max(1, options.maxTurns ?? REPLAY_MAX_TURNS);
  }

  /** Number of turns kept. */
  get size(): number {
    return this.turns.size;
  }

  /**
   * Keeps one event of a turn's stream (in `seq` order). False when it was kept already (a
   * repeated `seq`, e.g. an event relayed by another instance after a backfill had it).
   */
  record<K extends TurnStreamEventName>(name: K, event: TurnStreamEventMap[K]): boolean {
    const { turnId, seq } = event;
    if (turnId === undefined || seq === undefined) return true;
    let log = this.turns.get(turnId);
    if (!log) log = this.open(turnId, event.sessionId, seq);
    if (seq <= log.lastSeq) return false;
    if (seq !== log.lastSeq + 1) log.restartAt(seq);
    if (log.events.length < this.maxEvents) {
      log.names.push(name);
      log.events.push(event);
    } else {
      // The ring is full: the oldest event makes room.
      log.names[log.head] = name;
      log.events[log.head] = event;
      log.head = (log.head + 1) % this.maxEvents;
      log.firstSeq++;
    }
    log.lastSeq = seq;
    // The TTL runs from the stream-end marker (a turn blocked by `agent:turn:before` has no
    // turn end) and again from the turn end, which follows it.
    if (name === 'agent:turn:end') this.expire(turnId, log, true);
    else if (name === 'outbound:stream' && (event as StreamEvent).done) {
      this.expire(turnId, log, false);
    }
    return true;
  }

  /** Keeps a usage report as its turn's latest (when the turn is kept). */
  recordUsage(event: TokenUsageEvent): void {
    const log = event.turnId === undefined ? undefined : this.turns.get(event.turnId);
    if (log && log.sessionId === event.sessionId) log.usage = event;
  }

  /**
   * Adds a turn's events kept elsewhere (distributed mode: its log in Redis, in `seq` order) to
   * what is kept here, so that a resume can have them: the union by `seq`, kept from the newest
   * event back to the first gap. Listeners are not told (they have had the live ones).
   */
  backfill(sessionId: string, turnId: string, entries: readonly BackfillEntry[]): void {
    const bySeq = new Map<number, TurnStreamEntry>();
    let usage: TokenUsageEvent | undefined;
    for (const entry of entries) {
      if (entry.event.turnId !== turnId) continue;
      if (entry.name === 'token:usage') usage = entry.event;
      else if (entry.event.seq !== undefined) bySeq.set(entry.event.seq, entry);
    }
    const kept = this.turns.get(turnId);
    if (kept && kept.sessionId !== sessionId) return;
    usage = kept?.usage ?? usage;
    if (kept) {
      const here = this.replay(sessionId, turnId, kept.firstSeq - 1);
      if (here.status === 'ok')
        for (const entry of here.entries) bySeq.set(entry.event.seq!, entry);
      this.drop(turnId, kept);
    }
    const seqs = [...bySeq.keys()].sort((a, b) => a - b);
    let from = seqs.length - 1;
    while (from > 0 && seqs[from - 1] === seqs[from] - 1) from--;
    for (const seq of seqs.slice(Math.max(0, from))) {
      const entry = bySeq.get(seq)!;
      this.record(entry.name, entry.event);
    }
    if (usage) this.recordUsage(usage);
  }

  /** The events of `turnId` (of `sessionId`) after `afterSeq`, in order; see {@link ReplayResult}. */
  replay(sessionId: string, turnId: string, afterSeq: number): ReplayResult {
    const log = this.turns.get(turnId);
    if (!log || log.sessionId !== sessionId) return { status: 'unknown' };
    if (afterSeq < log.firstSeq - 1) return { status: 'incomplete' };
    const entries: TurnStreamEntry[] = [];
    const kept = log.events.length;
    for (let i = Math.max(0, afterSeq - log.firstSeq + 1); i < kept; i++) {
      const at = (log.head + i) % kept;
      entries.push({ name: log.names[at], event: log.events[at] } as TurnStreamEntry);
    }
    return { status: 'ok', entries, ended: log.ended, usage: log.usage };
  }

  /** Drops one turn. */
  forget(turnId: string): void {
    const log = this.turns.get(turnId);
    if (log) this.drop(turnId, log);
  }

  /** Drops every turn of a session (it was deleted). */
  forgetSession(sessionId: string): void {
    for (const [turnId, log] of this.turns) {
      if (log.sessionId === sessionId) this.drop(turnId, log);
    }
  }

  /** Drops everything and stops the timers. */
  clear(): void {
    for (const [turnId, log] of this.turns) this.drop(turnId, log);
  }

  /** Nest: the module is closing. */
  onModuleDestroy(): void {
    this.clear();
  }

  private open(turnId: string, sessionId: string, seq: number): TurnLog {
    if (this.turns.size >= this.maxTurns) {
      // Map order is insertion order: the first is the turn first seen longest ago.
      const [oldestId, oldest] = this.turns.entries().next().value as [string, TurnLog];
      this.drop(oldestId, oldest);
    }
    const log = new TurnLog(sessionId, seq);
    this.turns.set(turnId, log);
    return log;
  }

  private expire(turnId: string, log: TurnLog, ended: boolean): void {
    if (ended) log.ended = true;
    clearTimeout(log.expiry);
    log.expiry = setTimeout(() => {
      if (this.turns.get(turnId) === log) this.turns.delete(turnId);
    }, this.ttlMs);
    log.expiry.unref?.();
  }

  private drop(turnId: string, log: TurnLog): void {
    clearTimeout(log.expiry);
    this.turns.delete(turnId);
  }
}
