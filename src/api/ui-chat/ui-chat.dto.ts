import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { IsIdentifier, MAX_INPUT_ID_LENGTH } from '../agent/agent.dto';

/** Most messages of one `POST /agent/ui/chat` (the client sends its whole copy of the chat). */
export const MAX_UI_MESSAGES = 10_000;
/** Most parts of one UI message. */
export const MAX_UI_PARTS = 1_000;

const UI_ROLES = ['system', 'user', 'assistant'] as const;
const UI_TRIGGERS = ['submit-message', 'regenerate-message'] as const;

/** One part of a UI message; only `text` parts of the last user message are read. */
export interface UiMessagePart {
  type: string;
  text?: unknown;
}

/** A message of the AI SDK's `UIMessage` shape: the client's copy (never re-archived). */
export class UiMessageDto {
  @ApiProperty({ maxLength: MAX_INPUT_ID_LENGTH })
  @IsIdentifier({}, MAX_INPUT_ID_LENGTH)
  id!: string;

  @ApiProperty({ enum: UI_ROLES })
  @IsIn(UI_ROLES)
  role!: (typeof UI_ROLES)[number];

  @ApiProperty({ description: 'UIMessage parts; the text parts of the last user message are read' })
  @IsArray()
  @ArrayMaxSize(MAX_UI_PARTS)
  @IsObject({ each: true })
  parts!: UiMessagePart[];

  @ApiPropertyOptional()
  @IsOptional()
  @IsObject()
  metadata?: Record<string, unknown>;
}

/** Body of `POST /agent/ui/chat`: what the AI SDK's `DefaultChatTransport` sends. */
export class UiChatRequestDto {
  @ApiProperty({ description: 'The chat id: the session id', example: 'web:alice' })
  @IsIdentifier()
  id!: string;

  @ApiProperty({ type: [UiMessageDto], description: 'The last one must be a user message' })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_UI_MESSAGES)
  @ValidateNested({ each: true })
  @Type(() => UiMessageDto)
  messages!: UiMessageDto[];

  @ApiPropertyOptional({ enum: UI_TRIGGERS })
  @IsOptional()
  @IsIn(UI_TRIGGERS)
  trigger?: (typeof UI_TRIGGERS)[number];

  @ApiPropertyOptional({ maxLength: MAX_INPUT_ID_LENGTH })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_INPUT_ID_LENGTH)
  messageId?: string;

  @ApiPropertyOptional({
    description:
      "Stop the turn when the client closes the stream (the client's stop()); default false",
  })
  @IsOptional()
  @IsBoolean()
  abortOnDisconnect?: boolean;
}
