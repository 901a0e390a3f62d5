import type { QueueEvent, TokenUsageEvent } from '../../contracts';
import {
  REPLAY_TTL_MS,
  TurnReplayBuffer,
  type TurnStreamEntry,
  type TurnStreamEventMap,
  type TurnStreamEventName,
} from './turn-replay.buffer';

/**
 * What a feed listener hears: an event of a turn's stream, or a usage report or the waiting
 * list (not numbered, not replayed).
 */
export type FeedItem =
  | TurnStreamEntry
  | { name: 'token:usage'; event: TokenUsageEvent }
  | { name: 'agent:queue'; event: QueueEvent };

/** The session's latest turn as the feed saw it. */
export interface LatestTurn {
  turnId: string;
  /** The source of the input that opened it (absent: a human input). */
  source?: string;
  ended: boolean;
}

/**
 * The turns' streams for the SSE routes: records each event in the {@link TurnReplayBuffer} and,
 * in the same call, hands it to the listeners of its session, so a route that reads the buffer
 * and starts listening in one tick gets every event once. Also remembers each session's latest
 * turn (for as long as its stream is resumable), for `GET /agent/ui/chat/:id/stream`.
 */
export class TurnFeed {
  private readonly listeners = new Map<string, Set<(item: FeedItem) => void>>();
  private readonly latestTurns = new Map<string, LatestTurn>();

  constructor(
    readonly buffer: TurnReplayBuffer,
    private readonly ttlMs = REPLAY_TTL_MS,
  ) {}

  /**
   * Keeps one event of a turn's stream and tells the session's listeners; false (and nobody
   * told) when it was kept already.
   */
  record<K extends TurnStreamEventName>(name: K, event: TurnStreamEventMap[K]): boolean {
    if (!this.buffer.record(name, event)) return false;
    if (name === 'agent:turn:start') {
      const { turnId, source } = event as TurnStreamEventMap['agent:turn:start'];
      this.latestTurns.set(event.sessionId, { turnId, source, ended: false });
    } else if (name === 'agent:turn:end') this.ended(event as TurnStreamEventMap['agent:turn:end']);
    this.notify(event.sessionId, { name, event } as TurnStreamEntry);
    return true;
  }

  /** Keeps a usage report as its turn's latest and tells the session's listeners. */
  usage(event: TokenUsageEvent): void {
    this.buffer.recordUsage(event);
    this.notify(event.sessionId, { name: 'token:usage', event });
  }

  /** Tells the session's listeners of its waiting list. */
  queue(event: QueueEvent): void {
    this.notify(event.sessionId, { name: 'agent:queue', event });
  }

  /** Listens to one session's items; returns the function that stops listening. */
  listen(sessionId: string, listener: (item: FeedItem) => void): () => void {
    let set = this.listeners.get(sessionId);
    if (!set) this.listeners.set(sessionId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(sessionId) === set) this.listeners.delete(sessionId);
    };
  }

  /** The session's latest turn: running, or ended less than the TTL ago. */
  latest(sessionId: string): LatestTurn | undefined {
    return this.latestTurns.get(sessionId);
  }

  /** The session's latest turn as another instance kept it, unless one is known here. */
  adoptLatest(sessionId: string, latest: LatestTurn): void {
    if (this.latestTurns.has(sessionId)) return;
    this.latestTurns.set(sessionId, { ...latest });
    if (latest.ended) this.expireLatest(sessionId, this.latestTurns.get(sessionId)!);
  }

  /** A deleted session: its streams are not resumable any more. */
  forgetSession(sessionId: string): void {
    this.latestTurns.delete(sessionId);
    this.buffer.forgetSession(sessionId);
  }

  private ended(event: TurnStreamEventMap['agent:turn:end']): void {
    const latest = this.latestTurns.get(event.sessionId);
    if (latest?.turnId !== event.turnId) return;
    latest.ended = true;
    this.expireLatest(event.sessionId, latest);
  }

  private expireLatest(sessionId: string, latest: LatestTurn): void {
    setTimeout(() => {
      if (this.latestTurns.get(sessionId) === latest) this.latestTurns.delete(sessionId);
    }, this.ttlMs).unref?.();
  }

  private notify(sessionId: string, item: FeedItem): void {
    const set = this.listeners.get(sessionId);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(item);
      } catch {
        // A listener is an observer: it never breaks the turn that emits.
      }
    }
  }
}
