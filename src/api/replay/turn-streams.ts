import { Injectable, Logger } from '@nestjs/common';
import type { IncomingMessage, Settlement } from '../../contracts';
import { AgentApiService } from '../agent/agent-api.service';
import { errorForLog, escapeForLog } from '../http/escape-for-log';
import type { HttpResponse } from '../http/http-types';
import { SseWriter } from '../http/sse';
import { RemoteTurns } from './remote-turns';
import { TurnFeed } from './turn-feed';
import { parseStreamEventId, TurnStream, type TurnStreamProtocol } from './turn-stream';

/** How a frontend protocol's SSE responses are made. */
export interface StreamOptions {
  protocol: TurnStreamProtocol;
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Frames one event as SSE (`data: <json>\n\n` when absent). */
  format?: (event: object) => string;
  /** The request's `Last-Event-ID`. */
  lastEventId?: string;
  /** Stop the followed turn when the client closes the stream. */
  abortOnDisconnect?: boolean;
}

/**
 * The SSE routes of the frontend protocols (README, "AI SDK UI message stream", "AG-UI"): an
 * input goes to the agent as `POST /agent/messages` sends it and the answer streams the turn
 * that settles it; a resume streams the session's latest turn. The protocol only encodes.
 */
@Injectable()
export class TurnStreams {
  private readonly logger = new Logger('AgentStreams');

  constructor(
    private readonly api: AgentApiService,
    private readonly feed: TurnFeed,
    private readonly remote: RemoteTurns,
  ) {}

  /** Submits `message` (with an id) and streams the turn that settles it. */
  async input(
    message: IncomingMessage & { id: string },
    res: HttpResponse,
    options: StreamOptions,
  ): Promise<void> {
    const { sessionId } = message;
    // A retried request that got part of its stream continues after it, without a new input.
    if (await this.resumeAfter(sessionId, res, options)) return;
    // Distributed mode: the session's latest turn may run on another instance.
    await this.remote.prepareLatest(sessionId);
    const sse = new SseWriter(res, options.format);
    const stream = new TurnStream(sse, this.feed, options.protocol, sessionId, message.id);
    let accepted: { settlement: Promise<Settlement> };
    // The turn running now, when the input will join it (a human input joins a human turn).
    const latest = this.feed.latest(sessionId);
    const joining = latest && !latest.ended && latest.source === undefined ? latest.turnId : '';
    const joinAfter = joining ? stream.lastSeqOf(joining) : 0;
    try {
      accepted = await this.api.accept(message);
    } catch (error) {
      stream.close();
      throw error;
    }
    sse.start(options.headers);
    this.abortOnClose(res, stream, options.abortOnDisconnect === true);
    // (Unless its own turn started meanwhile: the stream already follows that one.)
    if (!stream.engaged && !(joining && stream.follow(joining, joinAfter, false))) {
      stream.queued(this.api.queue(sessionId).waiting);
    }
    accepted.settlement.then(
      async (settlement) => {
        // Distributed mode: the turn's end may come after the settlement, from its instance.
        if (settlement.settled === 'turn')
          await this.remote.whenEnded(sessionId, settlement.turnId);
        stream.settled(settlement);
      },
      () => stream.settled({ settled: 'dropped', reason: 'failed' }),
    );
  }

  /** Streams the session's latest turn (running, or ended within 60 s); 204 when none. */
  async resume(sessionId: string, res: HttpResponse, options: StreamOptions): Promise<void> {
    const resumeOptions = { ...options, abortOnDisconnect: false };
    if (await this.resumeAfter(sessionId, res, resumeOptions)) return;
    await this.remote.prepareLatest(sessionId);
    const latest = this.feed.latest(sessionId);
    const sse = new SseWriter(res, options.format);
    const stream = new TurnStream(sse, this.feed, options.protocol, sessionId);
    if (latest && this.startFollowing(stream, sse, res, latest.turnId, 0, false, resumeOptions)) {
      return;
    }
    stream.close();
    res.status(204).end();
  }

  /** Continues after a `Last-Event-ID` (`<turnId>:<seq>`) of the session; false when it can't. */
  private async resumeAfter(
    sessionId: string,
    res: HttpResponse,
    options: StreamOptions,
  ): Promise<boolean> {
    const after = parseStreamEventId(options.lastEventId);
    if (!after) return false;
    await this.remote.prepareTurn(sessionId, after.turnId, after.seq);
    const sse = new SseWriter(res, options.format);
    const stream = new TurnStream(sse, this.feed, options.protocol, sessionId);
    const { turnId, seq } = after;
    if (this.startFollowing(stream, sse, res, turnId, seq, true, options)) return true;
    stream.close();
    return false;
  }

  private startFollowing(
    stream: TurnStream,
    sse: SseWriter,
    res: HttpResponse,
    turnId: string,
    afterSeq: number,
    prime: boolean,
    options: StreamOptions,
  ): boolean {
    if (this.feed.buffer.replay(stream.sessionId, turnId, afterSeq).status !== 'ok') return false;
    sse.start(options.headers);
    this.abortOnClose(res, stream, options.abortOnDisconnect === true);
    return stream.follow(turnId, afterSeq, prime);
  }

  /** A closed connection stops listening; it stops the turn only when the client asked to. */
  private abortOnClose(res: HttpResponse, stream: TurnStream, abort: boolean): void {
    res.on('close', () => {
      if (stream.finished) return;
      const turnId = stream.runningTurn;
      stream.close();
      if (!abort || !turnId) return;
      this.api
        .abort(stream.sessionId, { turnId, reason: 'client closed the stream' })
        .catch((error: unknown) =>
          this.logger.warn(
            `Stop of ${escapeForLog(stream.sessionId)} failed: ${errorForLog(error)}`,
          ),
        );
    });
  }
}
