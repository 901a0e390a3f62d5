import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform, Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
  type ValidationOptions,
} from 'class-validator';
import type { Actor, MessageAttachment, ModelRef } from '../../contracts';
import { MAX_ID_LENGTH, NoControlChars, toInteger } from '../http/validation';

/** Longest `reason` of an abort or a clear. */
export const MAX_REASON_LENGTH = 1000;
/** Most attachments of one message. */
export const MAX_ATTACHMENTS = 32;
/** Most session ids of one clear. */
export const MAX_CLEAR_IDS = 1000;
/** Longest `id` of an input. */
export const MAX_INPUT_ID_LENGTH = 200;

/**
 * A non-blank string of at most `maxLength` characters without control characters (ids,
 * names): they reach logs, rooms and stores, where a newline or an ESC would forge or corrupt.
 */
export const IsIdentifier = (options: ValidationOptions = {}, maxLength = MAX_ID_LENGTH) =>
  applyDecorators(
    IsString(options),
    MaxLength(maxLength, options),
    Matches(/\S/, { ...options, message: '$property must not be blank' }),
    NoControlChars(options),
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
  @ApiPropertyOptional({
    maxLength: MAX_INPUT_ID_LENGTH,
    description: 'The input id: a repeated delivery with the same id settles once',
  })
  @IsOptional()
  @IsIdentifier({}, MAX_INPUT_ID_LENGTH)
  id?: string;

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
  @NoControlChars()
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

/** Default and largest page of `GET .../history`. */
export const HISTORY_PAGE = { default: 100, max: 1000 } as const;

/** Query of `GET /agent/sessions/:sessionId/history`. */
export class HistoryQueryDto {
  @ApiPropertyOptional({
    minimum: 1,
    maximum: HISTORY_PAGE.max,
    default: HISTORY_PAGE.default,
    description: 'Conversation messages per page, newest first (markers among them come along)',
  })
  @IsOptional()
  @Transform(toInteger)
  @IsInt()
  @Min(1)
  @Max(HISTORY_PAGE.max)
  limit?: number;

  @ApiPropertyOptional({ description: 'A message id: the page before it (`nextBefore`)' })
  @IsOptional()
  @IsIdentifier()
  before?: string;
}

/** Body of `POST /agent/sessions/abort` ("stop all"). */
export class AbortAllDto {
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

/** Body of `POST /agent/sessions/:sessionId/abort`: stop-all's fields and the turn to stop. */
export class AbortDto extends AbortAllDto {
  @ApiPropertyOptional({ description: 'Stop only if this turn is the running one' })
  @IsOptional()
  @IsIdentifier()
  turnId?: string;
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

/** Most tool rounds a session may allow. */
export const MAX_TOOL_ITERATIONS = 1000;
/** Largest history count limit of a session. */
export const MAX_HISTORY_LIMIT = 100_000;

/** Body of `PUT /agent/sessions/:sessionId`: settings created or updated, the fields given. */
export class SessionSettingsDto {
  @ApiPropertyOptional({ type: ModelRefDto, description: 'The conversation model (S6)' })
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => ModelRefDto)
  model?: ModelRefDto;

  @ApiPropertyOptional({ description: 'Deep thinking (reasoning) for the model calls' })
  @IsOptional()
  @IsBoolean()
  think?: boolean;

  @ApiPropertyOptional({ minimum: 0, maximum: MAX_TOOL_ITERATIONS })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_TOOL_ITERATIONS)
  maxToolIterations?: number;

  @ApiPropertyOptional({ minimum: 0, maximum: MAX_HISTORY_LIMIT, description: '0: no limit' })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_HISTORY_LIMIT)
  historyLimit?: number;
}
