import type { Settlement, TurnEnd } from '../../contracts';
import type { SseWriter } from '../http/sse';
import type { FeedItem, TurnFeed } from './turn-feed';
import type { TurnStreamEntry } from './turn-replay.buffer';

/** How a turn ended, as a stream's last events tell it. */
export type StreamEnd = Pick<TurnEnd, 'turnId' | 'outcome' | 'error'>;

/** Turns one turn's events into a protocol's events (stateful: one per turn). */
export interface TurnEventEncoder {
  encode(item: FeedItem): object[];
}

/**
 * What a frontend protocol sends around the turn events (the AI SDK's UI message stream,
 * AG-UI): each method answers the events to send, in order.
 */
export interface TurnStreamProtocol {
  /** When the stream opens, before anything else. */
  open(): object[];
  /** When the stream first follows a turn. */
  begin(turnId: string): object[];
  /** A fresh encoder of one turn's events. */
  encoder(turnId: string): TurnEventEncoder;
  /** The input's place in the waiting list (from 0) changed. */
  queued(position: number): object[];
  /** The input was dropped or discarded before any turn: the stream's last events. */
  dropped(settlement: Exclude<Settlement, { settled: 'turn' }>): object[];
  /** The stream's turn ended: its last events. */
  finish(end: StreamEnd): object[];
  /** A raw `data:` line after the last event (`[DONE]`). */
  last?: string;
}

/** The turn a stream follows. */
interface Followed {
  turnId: string;
  encoder: TurnEventEncoder;
  lastSeq: number;
  end?: StreamEnd;
}

/** The SSE `id:` of an event of a turn's stream: `<turnId>:<seq>`. */
export const streamEventId = (turnId: string, seq: number) => `${turnId}:${seq}`;

/** Reads an SSE `id:` (`<turnId>:<seq>`); `undefined` when it is not one. */
export function parseStreamEventId(
  id: string | undefined,
): { turnId: string; seq: number } | undefined {
  const match = id === undefined ? null : /^(.+):(\d{1,15})$/.exec(id.trim());
  return match ? { turnId: match[1], seq: Number(match[2]) } : undefined;
}

/**
 * One SSE response of a frontend protocol (README, "AI SDK UI message stream", "AG-UI"):
 * follows a turn of one session through the {@link TurnFeed}, from the replay buffer then
 * live, and ends with the protocol's last events when the stream is settled. Reading the
 * buffer and listening happen in one tick, so every event is sent once, in `seq` order.
 *
 * A stream for an input (`POST`) may follow a turn the input is expected to join and, when that
 * turn ends without it, wait for the turn that settles it; a resumed stream (`GET`) follows one
 * turn to its end.
 */
export class TurnStream {
  private followed?: Followed;
  /** The turn followed before, ended without the input (it may still have joined it). */
  private previous?: Followed;
  private started = false;
  private position?: number;
  private done = false;
  private settlement?: Settlement;
  private readonly stopListening: () => void;

  constructor(
    private readonly sse: SseWriter,
    private readonly feed: TurnFeed,
    private readonly protocol: TurnStreamProtocol,
    readonly sessionId: string,
    /** The input whose settlement ends the stream; absent: the stream ends with its turn. */
    private readonly inputId?: string,
  ) {
    this.stopListening = feed.listen(sessionId, (item) => this.onItem(item));
    sse.send(protocol.open());
  }

  /** Whether the stream was settled and ended (or closed). */
  get finished(): boolean {
    return this.done;
  }

  /** Whether the stream follows or followed a turn, or has ended. */
  get engaged(): boolean {
    return this.done || this.followed !== undefined || this.previous !== undefined;
  }

  /** The turn followed now, unless it has ended. */
  get runningTurn(): string | undefined {
    return this.followed && !this.followed.end ? this.followed.turnId : undefined;
  }

  /**
   * Follows `turnId`: its kept events after `afterSeq` now, then the live ones. With `prime`,
   * the earlier ones go through the encoder unsent (the client has them). False when the
   * buffer cannot replay it.
   */
  follow(turnId: string, afterSeq: number, prime: boolean): boolean {
    const replay = this.feed.buffer.replay(this.sessionId, turnId, prime ? 0 : afterSeq);
    if (replay.status !== 'ok') return false;
    this.followed = { turnId, encoder: this.protocol.encoder(turnId), lastSeq: afterSeq };
    this.begin(turnId);
    // The turn's latest usage report (a snapshot) comes with the replay, before the turn's end.
    let usage = replay.usage;
    for (const entry of replay.entries) {
      if ((entry.event.seq ?? 0) <= afterSeq) {
        this.followed.encoder.encode(entry);
        continue;
      }
      if (usage && entry.name === 'agent:turn:end')
        this.onItem({ name: 'token:usage', event: usage });
      if (entry.name === 'agent:turn:end') usage = undefined;
      this.onItem(entry);
    }
    if (usage) this.onItem({ name: 'token:usage', event: usage });
    return true;
  }

  /** The `seq` of the newest kept event of `turnId` (0 when none). */
  lastSeqOf(turnId: string): number {
    const replay = this.feed.buffer.replay(this.sessionId, turnId, 0);
    if (replay.status !== 'ok' || replay.entries.length === 0) return 0;
    return replay.entries[replay.entries.length - 1].event.seq ?? 0;
  }

  /**
   * While the input waits (no turn followed): sends its place in the session's waiting list
   * (from 0) when it changes.
   */
  queued(waiting: readonly { id?: string }[]): void {
    if (this.done || this.followed || this.inputId === undefined) return;
    const position = waiting.findIndex((m) => m.id === this.inputId);
    if (position < 0 || position === this.position) return;
    this.position = position;
    this.sse.send(this.protocol.queued(position));
  }

  /** The input is settled: ends the stream now, or once the turn that settled it has ended. */
  settled(settlement: Settlement): void {
    this.settlement = settlement;
    if (this.done) return;
    if (settlement.settled !== 'turn') {
      this.sse.send(this.protocol.dropped(settlement));
      return this.finish();
    }
    const ended = [this.followed, this.previous].find((f) => f?.turnId === settlement.turnId);
    if (ended?.end) return this.finish(ended.end);
    // It settled in a turn this stream did not follow (it joined it unseen): replay that turn.
    if (!ended) {
      this.follow(settlement.turnId, 0, false);
      if (!this.done && this.followed?.turnId !== settlement.turnId) this.finish(settlement);
    }
  }

  /** The client went away: stops listening. */
  close(): void {
    this.done = true;
    this.stopListening();
  }

  private begin(turnId: string): void {
    if (this.started) return;
    this.started = true;
    this.sse.send(this.protocol.begin(turnId));
  }

  private onItem(item: FeedItem): void {
    if (this.done) return;
    const followed = this.followed;
    if (item.name === 'agent:turn:start' && !followed?.turnId && this.opens(item)) {
      this.follow(item.event.turnId, 0, false);
      return;
    }
    if (item.name === 'agent:queue') return this.queued(item.event.waiting);
    if (!followed || item.event.turnId !== followed.turnId) return;
    if (item.name !== 'token:usage') {
      const seq = item.event.seq ?? 0;
      if (seq <= followed.lastSeq) return;
      followed.lastSeq = seq;
    }
    const chunks = followed.encoder.encode(item);
    this.sse.send(chunks, item.name === 'token:usage' ? undefined : this.idOf(item, followed));
    if (item.name === 'agent:turn:end') this.turnEnded(followed, item.event);
  }

  private idOf(item: TurnStreamEntry, followed: Followed): string {
    return streamEventId(followed.turnId, item.event.seq ?? followed.lastSeq);
  }

  /** Whether a turn start is the one this stream's input opens. */
  private opens(item: Extract<FeedItem, { name: 'agent:turn:start' }>): boolean {
    return this.inputId !== undefined && item.event.inputs.some((i) => i.id === this.inputId);
  }

  private turnEnded(followed: Followed, end: StreamEnd): void {
    followed.end = { turnId: end.turnId, outcome: end.outcome, error: end.error };
    const settlement = this.settlement;
    if (this.inputId === undefined) return this.finish(followed.end);
    if (settlement?.settled === 'turn' && settlement.turnId === followed.turnId) {
      return this.finish(followed.end);
    }
    // The input did not join this turn: it waits for the one that settles it.
    if (!settlement) {
      this.previous = followed;
      this.followed = undefined;
    }
  }

  /** Sends the last events (the turn's end, when it ended in one) and ends the response. */
  private finish(end?: StreamEnd): void {
    if (this.done) return;
    if (end) this.sse.send(this.protocol.finish(end));
    this.sse.end(this.protocol.last);
    this.close();
  }
}
