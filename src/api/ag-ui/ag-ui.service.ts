import { randomUUID } from 'node:crypto';
import { HttpException, HttpStatus, Injectable } from '@nestjs/common';
import type { IncomingMessage } from '../../contracts';
import { ValidationFailedException } from '../http/api-error';
import type { HttpResponse } from '../http/http-types';
import { TurnStreams } from '../replay/turn-streams';
import type { RunAgentInputDto } from './ag-ui.dto';
import { agUiProtocol } from './ag-ui.encoder';

/** The part of `@ag-ui/encoder`'s `EventEncoder` the route uses. */
interface AgUiEventEncoder {
  encodeSSE(event: object): string;
}

let encoderModule: { EventEncoder: new () => AgUiEventEncoder } | undefined;

/** `@ag-ui/encoder` (an optional peer dependency), loaded on the first run; 501 without it. */
function eventEncoder(): AgUiEventEncoder {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    encoderModule ??= require('@ag-ui/encoder') as typeof encoderModule;
  } catch {
    throw new HttpException(
      'POST /agent/ag-ui needs the package @ag-ui/encoder (npm install @ag-ui/encoder@^1)',
      HttpStatus.NOT_IMPLEMENTED,
    );
  }
  return new encoderModule!.EventEncoder();
}

/**
 * `POST /agent/ag-ui` (README, "AG-UI"): the last message, a user message, is the input of the
 * session `threadId`; the answer is the turn that settles it, as AG-UI events over SSE encoded
 * by AG-UI's own `EventEncoder`, under the client's `runId`.
 */
@Injectable()
export class AgUiService {
  constructor(private readonly streams: TurnStreams) {}

  run(body: RunAgentInputDto, res: HttpResponse, lastEventId?: string): Promise<void> {
    const encoder = eventEncoder();
    return this.streams.input(this.inputOf(body), res, {
      protocol: agUiProtocol(body.threadId, body.runId),
      format: (event) => encoder.encodeSSE(event),
      lastEventId,
    });
  }

  private inputOf(body: RunAgentInputDto): IncomingMessage & { id: string } {
    const last = body.messages[body.messages.length - 1];
    const text = last.role === 'user' ? textOf(last.content) : undefined;
    if (text === undefined) {
      throw new ValidationFailedException({
        messages: ['the last message must be a user message with text content'],
      });
    }
    const messageId = typeof last.id === 'string' ? last.id.slice(0, 200) : undefined;
    return {
      id: randomUUID(),
      sessionId: body.threadId,
      content: text,
      platform: 'api',
      messageId,
    };
  }
}

/** A user message's text: its string content, or its `text` parts joined. */
function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const texts = content
    .filter(
      (p): p is { type: 'text'; text: string } => p?.type === 'text' && typeof p.text === 'string',
    )
    .map((p) => p.text);
  return texts.length ? texts.join('\n') : undefined;
}
