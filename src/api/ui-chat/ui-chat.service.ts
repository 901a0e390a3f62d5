import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { IncomingMessage } from '../../contracts';
import { ValidationFailedException } from '../http/api-error';
import type { HttpResponse } from '../http/http-types';
import { TurnStreams } from '../replay/turn-streams';
import type { UiChatRequestDto } from './ui-chat.dto';
import { uiMessageProtocol } from './ui-message.encoder';

/** The header that marks the AI SDK's UI message stream protocol. */
export const UI_STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' };

/**
 * `POST /agent/ui/chat` and `GET /agent/ui/chat/:id/stream` (README, "AI SDK UI message
 * stream"): the last user message is the input; the answer is the turn that settles it, as UI
 * message chunks over SSE.
 */
@Injectable()
export class UiChatService {
  constructor(private readonly streams: TurnStreams) {}

  /** Submits the last user message of `body` and streams the turn that settles it. */
  chat(body: UiChatRequestDto, res: HttpResponse, lastEventId?: string): Promise<void> {
    return this.streams.input(this.inputOf(body), res, {
      protocol: uiMessageProtocol,
      headers: UI_STREAM_HEADERS,
      lastEventId,
      abortOnDisconnect: body.abortOnDisconnect,
    });
  }

  /** Streams the chat's latest turn (running, or ended within 60 s); 204 when none. */
  resume(sessionId: string, res: HttpResponse, lastEventId?: string): Promise<void> {
    return this.streams.resume(sessionId, res, {
      protocol: uiMessageProtocol,
      headers: UI_STREAM_HEADERS,
      lastEventId,
    });
  }

  /** The input: the text parts of the last message, which must be a user message. */
  private inputOf(body: UiChatRequestDto): IncomingMessage & { id: string } {
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
