import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform, Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateIf,
  ValidateNested,
  type ValidationOptions,
} from 'class-validator';
import type {
  AbortOptions,
  Actor,
  IncomingMessage,
  Message,
  MessageAttachment,
  ModelRef,
  Settlement,
  TokenUsageEvent,
  TurnOutcome,
} from '../../contracts';
import { MAX_ID_LENGTH } from '../http/validation';

/** Longest `reason` of an abort or a clear. */
export const MAX_REASON_LENGTH = 1000;
/** Most attachments of one message. */
export const MAX_ATTACHMENTS = 32;
/** Most session ids of one clear. */
export const MAX_CLEAR_IDS = 1000;

/** A non-blank string of at most `MAX_ID_LENGTH` characters (ids, names). */
export const IsIdentifier = (options: ValidationOptions = {}) =>
  applyDecorators(
    IsString(options),
    MaxLength(MAX_ID_LENGTH, options),
    Matches(/\S/, { ...options, message: '$property must not be blank' }),
  );

/** Who authorised a system-originated message (contract H5). */
export class ActorDto implements Actor {
  @ApiProperty({ maxLength: MAX_ID_LENGTH, example: 'telegram' })
  @IsIdentifier()
  platform!: string;

  @ApiProperty({ maxLength: MAX_ID_LENGTH, example: '42' })
  @IsIdentifier()
  userId!: string;
}

const ATTACHMENT_KINDS = ['image', 'audio', 'video', 'file'] as const;

/**
 * One attachment. `data` is a data URL or an http(s) URL; `file://` URLs are refused over the
 * network, since they would let a caller name files of the server.
 */
export class AttachmentDto implements MessageAttachment {
  @ApiProperty({ enum: ATTACHMENT_KINDS })
  @IsIn(ATTACHMENT_KINDS)
  kind!: MessageAttachment['kind'];

  @ApiProperty({ description: 'data: URL or http(s) URL', example: 'https://example.com/a.png' })
  @Matches(/^(data:|https?:\/\/)/i, { message: '$property must be a data: or http(s) URL' })
  @IsString()
  data!: string;

  @ApiPropertyOptional({ maxLength: MAX_ID_LENGTH, example: 'image/png' })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_ID_LENGTH)
  mimeType?: string;

  @ApiPropertyOptional({ maxLength: 1024 })
  @IsOptional()
  @IsString()
  @MaxLength(1024)
  name?: string;
}

/** Body of `POST /agent/messages` and of the socket `message` event: an `IncomingMessage`. */
export class MessageDto {
  @ApiProperty({ maxLength: MAX_ID_LENGTH, example: 'web:alice' })
  @IsIdentifier()
  sessionId!: string;

  @ApiProperty({ example: 'Hello!' })
  @IsString()
  content!: string;

  @ApiPropertyOptional({ maxLength: MAX_ID_LENGTH })
  @IsOptional()
  @IsIdentifier()
  userId?: string;

  @ApiPropertyOptional({ maxLength: MAX_ID_LENGTH, description: "@default 'api'" })
  @IsOptional()
  @IsIdentifier()
  platform?: string;

  @ApiPropertyOptional({
    maxLength: MAX_ID_LENGTH,
    description: 'Absent for human input; scheduler, webhook, ... for sourced input',
  })
  @IsOptional()
  @IsIdentifier()
  source?: string;

  @ApiPropertyOptional({ type: ActorDto })
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => ActorDto)
  actor?: ActorDto;

  @ApiPropertyOptional({ type: [AttachmentDto], maxItems: MAX_ATTACHMENTS })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_ATTACHMENTS)
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => AttachmentDto)
  attachments?: AttachmentDto[];

  @ApiPropertyOptional({ maxLength: 64, example: 'web', description: "'room', 'web', 'api', ..." })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  sessionKind?: string;
}

const toBoolean = ({ value }: { value: unknown }) =>
  value === 'true' ? true : value === 'false' ? false : value;

/** Query of `POST /agent/messages`. */
export class WaitQueryDto {
  @ApiPropertyOptional({ description: 'Answer 200 with the settlement once settled' })
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  wait?: boolean;
}

/** Body of `POST /agent/sessions/:sessionId/abort`. */
export class AbortDto {
  @ApiPropertyOptional({ description: 'Stop only if this turn is the running one' })
  @IsOptional()
  @IsIdentifier()
  turnId?: string;

  @ApiPropertyOptional({ description: 'Also drop the waiting inputs' })
  @IsOptional()
  @IsBoolean()
  queued?: boolean;

  @ApiPropertyOptional({ maxLength: MAX_REASON_LENGTH, description: 'Only logged' })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_REASON_LENGTH)
  reason?: string;
}

/** Payload of the socket `abort` event. */
export class SocketAbortDto extends AbortDto {
  @IsIdentifier()
  sessionId!: string;
}

/** Body of `PUT /agent/sessions/:sessionId/model`: a `ModelRef`. */
export class ModelRefDto implements ModelRef {
  @ApiPropertyOptional({ maxLength: MAX_ID_LENGTH, description: 'Provider instance id' })
  @IsOptional()
  @IsIdentifier()
  provider?: string;

  @ApiProperty({ maxLength: MAX_ID_LENGTH, example: 'gpt-4o-mini' })
  @IsIdentifier()
  model!: string;
}

/** Body of `POST /agent/sessions/clear`. */
export class ClearDto {
  @ApiPropertyOptional({
    type: [String],
    maxItems: MAX_CLEAR_IDS,
    description: 'Absent: all sessions',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CLEAR_IDS)
  @IsIdentifier({ each: true })
  sessionIds?: string[];

  @ApiPropertyOptional({ maxLength: MAX_REASON_LENGTH, description: 'Only logged' })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_REASON_LENGTH)
  reason?: string;
}

/** Payload of the socket `subscribe` event: one session, or all of them. */
export class SubscribeDto {
  /** Required unless `all` is true. */
  @ValidateIf((o: SubscribeDto) => o.all !== true || o.sessionId !== undefined)
  @IsIdentifier()
  sessionId?: string;

  @IsOptional()
  @IsIn([true], { message: '$property must be true when given' })
  all?: true;
}

// ---- answers --------------------------------------------------------------------------------

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

// ---- mapping --------------------------------------------------------------------------------

/** Keeps only the defined values, so that no `undefined` key reaches the agent or the wire. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A validated message body -> the agent's `IncomingMessage` (plain objects only). */
export function mapIncomingMessage(dto: MessageDto): IncomingMessage {
  return defined<IncomingMessage>({
    sessionId: dto.sessionId,
    content: dto.content,
    userId: dto.userId,
    platform: dto.platform,
    source: dto.source,
    actor: dto.actor ? { platform: dto.actor.platform, userId: dto.actor.userId } : undefined,
    attachments: dto.attachments?.map((a) =>
      defined<MessageAttachment>({
        kind: a.kind,
        data: a.data,
        mimeType: a.mimeType,
        name: a.name,
      }),
    ),
    sessionKind: dto.sessionKind,
  });
}

/** A settlement -> the `?wait=true` answer. */
export function mapSettlement(settlement: Settlement): SettledResponse {
  if (settlement.settled !== 'turn') return { settled: settlement.settled };
  return defined<SettledResponse>({
    settled: 'turn',
    turnId: settlement.turnId,
    outcome: settlement.outcome,
    reply: settlement.reply,
  });
}

/** An abort body -> the agent's options, `by` being the authenticated caller. */
export function mapAbortOptions(dto: AbortDto | undefined, by: Actor | undefined): AbortOptions {
  return defined<AbortOptions>({
    turnId: dto?.turnId,
    queued: dto?.queued,
    reason: dto?.reason,
    by: by ? { platform: by.platform, userId: by.userId } : undefined,
  });
}

/** A model body -> `ModelRef`. */
export function mapModelRef(dto: ModelRefDto): ModelRef {
  return defined<ModelRef>({ provider: dto.provider, model: dto.model });
}
