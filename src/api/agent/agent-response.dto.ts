import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type {
  DropReason,
  IncomingMessage,
  Message,
  ModelRef,
  SessionList,
  SessionState,
  SessionSummary,
  SessionView,
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
// A record, so that a reason added to the contract fails the typecheck until it is listed.
const DROP_REASONS = Object.keys({
  aborted: 1,
  cleared: 1,
  deleted: 1,
  shutdown: 1,
  'stale-generation': 1,
  blocked: 1,
  failed: 1,
  'queue-full': 1,
  'store-unavailable': 1,
} satisfies Record<DropReason, 1>) as DropReason[];

/** `200` of `POST /agent/messages?wait=true`: how the input was settled (contract S1). */
export class SettledResponse {
  @ApiProperty({ enum: ['turn', 'dropped', 'discarded'] })
  settled!: Settlement['settled'];

  @ApiPropertyOptional()
  turnId?: string;

  @ApiPropertyOptional({ enum: OUTCOMES })
  outcome?: TurnOutcome;

  @ApiPropertyOptional({ description: 'The reply sent, on outcome `replied`' })
  reply?: string;

  @ApiPropertyOptional({ description: 'The one-sentence notice sent, on outcome `error`' })
  error?: string;

  @ApiPropertyOptional({
    enum: DROP_REASONS,
    description:
      'Why the input was dropped, on `dropped` (`queue-full` answers 429, `store-unavailable` 503)',
  })
  reason?: DropReason;
}

/** `200` of an abort. */
export class StoppedResponse {
  @ApiProperty()
  stopped!: boolean;
}

/** `200` of "stop all". */
export class StoppedAllResponse {
  @ApiProperty({ type: [String], description: 'The sessions whose running turn was stopped' })
  stopped!: string[];
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

/** A session's settings, as `GET` and `PUT /agent/sessions/:sessionId` answer them. */
export class SessionSettingsResponse {
  @ApiPropertyOptional({ description: 'A ModelRef { provider?, model }' }) model?: ModelRef;
  @ApiPropertyOptional() think?: boolean;
  @ApiPropertyOptional() maxToolIterations?: number;
  @ApiPropertyOptional() historyLimit?: number;
}

/** `200` of `GET` and `PUT /agent/sessions/:sessionId`. */
export class SessionResponse implements SessionView {
  @ApiProperty() sessionId!: string;
  @ApiProperty({ enum: ['running', 'waiting', 'idle', 'held'] }) state!: SessionState;
  @ApiPropertyOptional() runningTurnId?: string;
  @ApiProperty({ description: 'How many inputs wait' }) waiting!: number;
  @ApiPropertyOptional({ description: 'Distributed mode: the instance that runs the session now' })
  holder?: string;
  @ApiProperty({ type: SessionSettingsResponse }) settings!: SessionSettingsResponse;
  @ApiPropertyOptional({ description: '{ turnId, outcome, source?, error?, by?, endedAt }' })
  lastTurn?: SessionView['lastTurn'];
}

/** One session of `GET /agent/sessions`. */
export class SessionSummaryResponse implements SessionSummary {
  @ApiProperty() sessionId!: string;
  @ApiProperty({ enum: ['running', 'waiting', 'idle', 'held'] }) state!: SessionState;
  @ApiPropertyOptional() runningTurnId?: string;
  @ApiProperty({ description: 'How many inputs wait' }) waiting!: number;
  @ApiPropertyOptional({ description: '{ turnId, outcome, source?, error?, by?, endedAt }' })
  lastTurn?: SessionSummary['lastTurn'];
  @ApiPropertyOptional({ description: 'The conversation model, a ModelRef { provider?, model }' })
  model?: ModelRef;
  @ApiProperty({
    description:
      'ISO-8601 time of the last activity (accepted input or ended turn; creation before either)',
  })
  updatedAt!: string;
}

/** `200` of `GET /agent/sessions`: most recent activity first. */
export class SessionListResponse implements SessionList {
  @ApiProperty({ type: [SessionSummaryResponse] })
  sessions!: SessionSummaryResponse[];

  @ApiPropertyOptional({ description: 'Present when more follow: `cursor` of the next page' })
  nextCursor?: string;
}

/** `200` of `GET .../history`. */
export class HistoryResponse {
  @ApiProperty({
    type: 'array',
    items: { type: 'object' },
    description: 'Persisted messages of the page, oldest first',
  })
  messages!: Message[];

  @ApiPropertyOptional({
    description: 'The oldest message of the page, when older ones exist: `before` of the next page',
  })
  nextBefore?: string;
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
  @ApiPropertyOptional({
    enum: ['queue-full', 'store-unavailable'],
    description: 'Why a `?wait=true` input was dropped (429, 503)',
  })
  reason?: DropReason;
}
