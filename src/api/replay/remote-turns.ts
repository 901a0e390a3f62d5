import { Injectable } from '@nestjs/common';
import type { EventRelay } from '../../agent';
import { AgentBackend } from '../agent-backend';
import { TurnFeed } from './turn-feed';
import type { BackfillEntry } from './turn-replay.buffer';

/** How long a settlement waits for its turn's end to arrive from the instance that ran it (ms). */
const END_WAIT_MS = 2_000;

/**
 * Distributed mode's side of resuming (README, "Resuming a turn's stream"): a turn may have run
 * on another instance, or started before this one heard of it. Before a resume reads the
 * {@link TurnFeed}'s buffer, the turn's events kept in Redis are added to it (only when the
 * buffer cannot answer alone); the live ones reach the feed from the other instances already
 * (`AgentEventsBridge`). In one process every method resolves at once and does nothing.
 */
@Injectable()
export class RemoteTurns {
  private relay?: EventRelay | null;

  constructor(
    private readonly backend: AgentBackend,
    private readonly feed: TurnFeed,
  ) {}

  /** The relay between instances; `undefined` in one process. */
  get eventRelay(): EventRelay | undefined {
    if (this.relay === undefined) this.relay = this.backend.distribution?.eventRelay() ?? null;
    return this.relay ?? undefined;
  }

  /**
   * Makes the buffer able to replay `turnId` after `afterSeq`, when Redis keeps what it lacks;
   * forgets it when Redis does not know it (its session was deleted, maybe by another instance
   * whose word has not arrived yet).
   */
  async prepareTurn(sessionId: string, turnId: string, afterSeq: number): Promise<void> {
    const relay = this.eventRelay;
    if (!relay) return;
    if (!(await relay.hasTurn(sessionId, turnId))) return this.feed.buffer.forget(turnId);
    if (this.feed.buffer.replay(sessionId, turnId, afterSeq).status === 'ok') return;
    const kept = await relay.turnLog(turnId);
    this.feed.buffer.backfill(sessionId, turnId, kept as BackfillEntry[]);
  }

  /** Makes the session's latest turn known here (and its events replayable), when Redis knows it. */
  async prepareLatest(sessionId: string): Promise<void> {
    const relay = this.eventRelay;
    if (!relay) return;
    let latest = this.feed.latest(sessionId);
    if (!latest) {
      const kept = await relay.latestTurn(sessionId);
      if (kept) this.feed.adoptLatest(sessionId, kept);
      latest = this.feed.latest(sessionId);
    }
    if (latest) await this.prepareTurn(sessionId, latest.turnId, 0);
  }

  /**
   * Resolves once this instance has `turnId`'s end: at once in one process or when the buffer has
   * it; else when it arrives from the instance that ran the turn, or after {@link END_WAIT_MS}
   * from Redis (a settlement may come through the mailbox before the turn's events).
   */
  async whenEnded(sessionId: string, turnId: string): Promise<void> {
    if (!this.eventRelay || this.endedHere(sessionId, turnId)) return;
    await new Promise<void>((resolve) => {
      const stop = this.feed.listen(sessionId, (item) => {
        if (item.name === 'agent:turn:end' && item.event.turnId === turnId) done();
      });
      const timer = setTimeout(() => done(), END_WAIT_MS);
      function done() {
        clearTimeout(timer);
        stop();
        resolve();
      }
      if (this.endedHere(sessionId, turnId)) done();
    });
    if (!this.endedHere(sessionId, turnId)) await this.prepareTurn(sessionId, turnId, 0);
  }

  private endedHere(sessionId: string, turnId: string): boolean {
    const replay = this.feed.buffer.replay(sessionId, turnId, 0);
    return replay.status === 'ok' && replay.ended;
  }
}
