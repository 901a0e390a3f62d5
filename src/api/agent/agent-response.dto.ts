import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type {
  IncomingMessage,
  Message,
  Settlement,
  TokenUsageEvent,
  TurnOutcome,
} from '../../contracts';

/** `202` of `POST /agent/messages`. */
export class AcceptedResponse {
  @ApiProperty({ enum: [true] })
  accepted!: true;
}

const OUTCOMES: TurnOutcome[] = ['replied', 'silent', 'aborted', 'error'];

/** `200` of `POST /agent/messages?wait=true`: how the input was settled (contract S1). */
export class SettledResponse {
  @ApiProperty({ enum: ['turn', 'dropped', 'discarded'] })
  settled!: Settlement['settled'];

  @ApiPropertyOptional()
  turnId?: string;

  @ApiPropertyOptional({ enum: OUTCOMES })
  outcome?: TurnOutcome;

  @ApiPropertyOptional()
  reply?: string;
}

/** `200` of an abort. */
export class StoppedResponse {
  @ApiProperty()
  stopped!: boolean;
}

/** `200` of a clear. */
export class ClearedResponse {
  @ApiProperty({ oneOf: [{ type: 'array', items: { type: 'string' } }, { enum: ['all'] }] })
  cleared!: string[] | 'all';
}

/** `200` of `GET .../queue`. */
export class QueueResponse {
  @ApiProperty()
  sessionId!: string;

  @ApiProperty({ type: 'array', items: { type: 'object' }, description: 'IncomingMessages' })
  waiting!: IncomingMessage[];
}

/** `200` of `GET .../history`. */
export class HistoryResponse {
  @ApiProperty({ type: 'array', items: { type: 'object' }, description: 'Persisted messages' })
  messages!: Message[];
}

/** `200` of `GET .../usage`: a `token:request` snapshot (no `turnId`). */
export class UsageResponse implements Partial<TokenUsageEvent> {
  @ApiProperty() sessionId!: string;
  @ApiProperty() used!: number;
  @ApiProperty() usageRatio!: number;
  @ApiProperty() contextWindow!: number;
  @ApiProperty() tokenBudget!: number;
  @ApiProperty() maxTokens!: number;
  @ApiProperty() trimmed!: boolean;
  @ApiProperty() untrimmedHistory!: number;
  @ApiProperty() historyMessages!: number;
  @ApiProperty() historyLimit!: number;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'number' } })
  breakdown!: TokenUsageEvent['breakdown'];
  @ApiProperty({ type: 'array', items: { type: 'object' } })
  parts!: TokenUsageEvent['parts'];
}

/** Every error answer. */
export class ErrorResponse {
  @ApiProperty() statusCode!: number;
  @ApiProperty() error!: string;
  @ApiProperty() message!: string;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string' } },
    description: 'Failing fields (400)',
  })
  fields?: Record<string, string[]>;
}
