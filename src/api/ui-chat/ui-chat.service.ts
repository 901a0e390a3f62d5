import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { IncomingMessage, Settlement } from '../../contracts';
import { AgentApiService } from '../agent/agent-api.service';
import { ValidationFailedException } from '../http/api-error';
import { errorForLog, escapeForLog } from '../http/escape-for-log';
import type { HttpResponse } from '../http/http-types';
import { SseWriter } from '../http/sse';
import { TurnFeed } from '../replay/turn-feed';
import type { UiChatRequestDto } from './ui-chat.dto';
import { parseUiEventId, UiChatStream } from './ui-chat.stream';

/** The header that marks the AI SDK's UI message stream protocol. */
export const UI_STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' };

/**
 * `POST /agent/ui/chat` and `GET /agent/ui/chat/:id/stream` (README, "AI SDK UI message
 * stream"): the input goes to the agent as `POST /agent/messages` sends it, and the answer
 * streams the turn that settles it, as UI message chunks over SSE.
 */
@Injectable()
export class UiChatService {
  private readonly logger = new Logger('AgentUiChat');

  constructor(
    private readonly api: AgentApiService,
    private readonly feed: TurnFeed,
  ) {}

  /** Submits the last user message of `body` and streams the turn that settles it. */
  async chat(body: UiChatRequestDto, res: HttpResponse, lastEventId?: string): Promise<void> {
    const sessionId = body.id;
    // A retried request that got part of its stream continues after it, without a new input.
    if (this.resumeAfter(sessionId, lastEventId, res, body.abortOnDisconnect)) return;
    const message = this.inputOf(body);
    const sse = new SseWriter(res);
    const stream = new UiChatStream(sse, this.feed, sessionId, message.id);
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
    sse.start(UI_STREAM_HEADERS);
    this.abortOnClose(res, stream, body.abortOnDisconnect === true);
    // (Unless its own turn started meanwhile: the stream already follows that one.)
    if (!stream.engaged && !(joining && stream.follow(joining, joinAfter, false))) {
      stream.queued(this.api.queue(sessionId).waiting);
    }
    accepted.settlement.then(
      (settlement) => stream.settled(settlement),
      () => stream.settled({ settled: 'dropped', reason: 'failed' }),
    );
  }

  /** Streams the session's latest turn (running, or ended within 60 s); 204 when none. */
  resume(sessionId: string, res: HttpResponse, lastEventId?: string): void {
    if (this.resumeAfter(sessionId, lastEventId, res, false)) return;
    const latest = this.feed.latest(sessionId);
    const sse = new SseWriter(res);
    const stream = new UiChatStream(sse, this.feed, sessionId);
    if (latest && this.startFollowing(stream, sse, res, latest.turnId, 0, false)) return;
    stream.close();
    res.status(204).end();
  }

  /** Continues after a `Last-Event-ID` (`<turnId>:<seq>`) of the session; false when it can't. */
  private resumeAfter(
    sessionId: string,
    lastEventId: string | undefined,
    res: HttpResponse,
    abortOnDisconnect = false,
  ): boolean {
    const after = parseUiEventId(lastEventId);
    if (!after) return false;
    const sse = new SseWriter(res);
    const stream = new UiChatStream(sse, this.feed, sessionId);
    const { turnId, seq } = after;
    if (this.startFollowing(stream, sse, res, turnId, seq, true, abortOnDisconnect)) return true;
    stream.close();
    return false;
  }

  private startFollowing(
    stream: UiChatStream,
    sse: SseWriter,
    res: HttpResponse,
    turnId: string,
    afterSeq: number,
    prime: boolean,
    abortOnDisconnect = false,
  ): boolean {
    if (this.feed.buffer.replay(stream.sessionId, turnId, afterSeq).status !== 'ok') return false;
    sse.start(UI_STREAM_HEADERS);
    this.abortOnClose(res, stream, abortOnDisconnect);
    return stream.follow(turnId, afterSeq, prime);
  }

  /** A closed connection stops listening; it stops the turn only when the client asked to. */
  private abortOnClose(res: HttpResponse, stream: UiChatStream, abort: boolean): void {
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

  /** The input: the text parts of the last message, which must be a user message. */
  private inputOf(body: UiChatRequestDto): IncomingMessage {
    const last = body.messages[body.messages.length - 1];
    const text = last.role === 'user' ? textOf(last.parts) : undefined;
    if (text === undefined) {
      throw new ValidationFailedException({
        messages: ['the last message must be a user message with a text part'],
      });
    }
    return {
      id: randomUUID(),
      sessionId: body.id,
      content: text,
      platform: 'api',
      messageId: last.id,
    };
  }
}

/** The text of a message's text parts, joined; `undefined` when it has none. */
function textOf(parts: readonly { type: string; text?: unknown }[]): string | undefined {
  const texts = parts
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text as string);
  return texts.length ? texts.join('\n') : undefined;
}
