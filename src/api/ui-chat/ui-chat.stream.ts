import type { Settlement, TurnOutcome } from '../../contracts';
import type { SseWriter } from '../http/sse';
import type { FeedItem, TurnFeed } from '../replay/turn-feed';
import type { TurnStreamEntry } from '../replay/turn-replay.buffer';
import { UiMessageEncoder } from './ui-message.encoder';

/** The turn a stream follows. */
interface Followed {
  turnId: string;
  encoder: UiMessageEncoder;
  lastSeq: number;
  outcome?: TurnOutcome;
}

const FINISH_REASONS: Record<TurnOutcome, string> = {
  replied: 'stop',
  silent: 'stop',
  aborted: 'other',
  error: 'error',
};

/** The SSE `id:` of an event of a turn's stream: `<turnId>:<seq>`. */
export const uiEventId = (turnId: string, seq: number) => `${turnId}:${seq}`;

/** Reads an SSE `id:` (`<turnId>:<seq>`); `undefined` when it is not one. */
export function parseUiEventId(
  id: string | undefined,
): { turnId: string; seq: number } | undefined {
  const match = id === undefined ? null : /^(.+):(\d{1,15})$/.exec(id.trim());
  return match ? { turnId: match[1], seq: Number(match[2]) } : undefined;
}

/**
 * One UI message stream response (README, "AI SDK UI message stream"): follows a turn of one
 * session through the {@link TurnFeed}, from the replay buffer then live, and ends with
 * `finish` and `[DONE]` when the stream is settled. Reading the buffer and listening happen in
 * one tick, so every event is sent once, in `seq` order.
 *
 * A stream for an input (`POST`) may follow a turn the input is expected to join and, when that
 * turn ends without it, wait for the turn that settles it; a resumed stream (`GET`) follows one
 * turn to its end.
 */
export class UiChatStream {
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
    readonly sessionId: string,
    /** The input whose settlement ends the stream; absent: the stream ends with its turn. */
    private readonly inputId?: string,
  ) {
    this.stopListening = feed.listen(sessionId, (item) => this.onItem(item));
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
    return this.followed && !this.followed.outcome ? this.followed.turnId : undefined;
  }

  /**
   * Follows `turnId`: its kept events after `afterSeq` now, then the live ones. With `prime`,
   * the earlier ones go through the encoder unsent (the client has them). False when the
   * buffer cannot replay it.
   */
  follow(turnId: string, afterSeq: number, prime: boolean): boolean {
    const replay = this.feed.buffer.replay(this.sessionId, turnId, prime ? 0 : afterSeq);
    if (replay.status !== 'ok') return false;
    this.followed = { turnId, encoder: new UiMessageEncoder(turnId), lastSeq: afterSeq };
    this.begin(turnId);
    for (const entry of replay.entries) {
      if ((entry.event.seq ?? 0) <= afterSeq) this.followed.encoder.encode(entry);
      else this.onItem(entry);
    }
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
   * (`data-queue`, from 0) when it changes.
   */
  queued(waiting: readonly { id?: string }[]): void {
    if (this.done || this.followed || this.inputId === undefined) return;
    const position = waiting.findIndex((m) => m.id === this.inputId);
    if (position < 0 || position === this.position) return;
    this.position = position;
    this.sse.send([{ type: 'data-queue', data: { position } }]);
  }

  /** The input is settled: ends the stream now, or once the turn that settled it has ended. */
  settled(settlement: Settlement): void {
    this.settlement = settlement;
    if (this.done) return;
    if (settlement.settled !== 'turn') {
      const why = settlement.settled === 'dropped' ? `dropped (${settlement.reason})` : 'discarded';
      this.sse.send([{ type: 'data-settlement', data: settlement }]);
      this.sse.send([{ type: 'error', errorText: `The input was ${why} before any turn` }]);
      return this.finish('other');
    }
    const ended = [this.followed, this.previous].find((f) => f?.turnId === settlement.turnId);
    if (ended?.outcome) return this.finish(FINISH_REASONS[ended.outcome]);
    // It settled in a turn this stream did not follow (it joined it unseen): replay that turn.
    if (!ended) {
      this.follow(settlement.turnId, 0, false);
      if (!this.done && this.followed?.turnId !== settlement.turnId) {
        this.finish(FINISH_REASONS[settlement.outcome]);
      }
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
    this.sse.send([{ type: 'start', messageId: turnId }]);
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
    if (item.name === 'agent:turn:end') this.turnEnded(followed, item.event.outcome);
  }

  private idOf(item: TurnStreamEntry, followed: Followed): string {
    return uiEventId(followed.turnId, item.event.seq ?? followed.lastSeq);
  }

  /** Whether a turn start is the one this stream's input opens. */
  private opens(item: Extract<FeedItem, { name: 'agent:turn:start' }>): boolean {
    return this.inputId !== undefined && item.event.inputs.some((i) => i.id === this.inputId);
  }

  private turnEnded(followed: Followed, outcome: TurnOutcome): void {
    followed.outcome = outcome;
    const settlement = this.settlement;
    if (this.inputId === undefined) return this.finish(FINISH_REASONS[outcome]);
    if (settlement?.settled === 'turn' && settlement.turnId === followed.turnId) {
      return this.finish(FINISH_REASONS[outcome]);
    }
    // The input did not join this turn: it waits for the one that settles it.
    if (!settlement) {
      this.previous = followed;
      this.followed = undefined;
    }
  }

  private finish(finishReason: string): void {
    if (this.done) return;
    this.sse.send([{ type: 'finish', finishReason }]);
    this.sse.end('[DONE]');
    this.close();
  }
}
