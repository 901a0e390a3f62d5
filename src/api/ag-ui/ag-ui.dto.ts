import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  Allow,
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsObject,
  IsOptional,
  IsString,
  MaxLength,
} from 'class-validator';
import { IsIdentifier, MAX_INPUT_ID_LENGTH } from '../agent/agent.dto';
import { MAX_UI_MESSAGES } from '../ui-chat/ui-chat.dto';

/** Most tools or context entries of one run. */
export const MAX_AG_UI_ENTRIES = 1_000;

/** An AG-UI message; only the content of the last one, a user message, is read. */
export interface AgUiMessage {
  id?: unknown;
  role?: unknown;
  content?: unknown;
}

/**
 * Body of `POST /agent/ag-ui`: AG-UI's `RunAgentInput` as version 1.0 clients send it. The
 * thread is the session; `tools`, `context`, `state`, `forwardedProps` and `resume` are
 * accepted and not used (the agent's tools and prompt are the server's).
 */
export class RunAgentInputDto {
  @ApiProperty({ description: 'The session id', example: 'web:alice' })
  @IsIdentifier()
  threadId!: string;

  @ApiProperty({ maxLength: MAX_INPUT_ID_LENGTH, description: 'The run id the events carry' })
  @IsIdentifier({}, MAX_INPUT_ID_LENGTH)
  runId!: string;

  @ApiPropertyOptional({ maxLength: MAX_INPUT_ID_LENGTH })
  @IsOptional()
  @IsIdentifier({}, MAX_INPUT_ID_LENGTH)
  parentRunId?: string;

  @ApiPropertyOptional({ example: '1.0.0' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  protocolVersion?: string;

  @ApiProperty({ description: 'AG-UI messages; the last one must be a user message' })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_UI_MESSAGES)
  @IsObject({ each: true })
  messages!: AgUiMessage[];

  @ApiProperty({ description: 'Accepted, not used: the agent has its own tools' })
  @IsArray()
  @ArrayMaxSize(MAX_AG_UI_ENTRIES)
  @IsObject({ each: true })
  tools!: object[];

  @ApiProperty({ description: 'Accepted, not used' })
  @IsArray()
  @ArrayMaxSize(MAX_AG_UI_ENTRIES)
  @IsObject({ each: true })
  context!: object[];

  @ApiPropertyOptional({ description: 'Accepted, not used' })
  @Allow()
  state?: unknown;

  @ApiPropertyOptional({ description: 'Accepted, not used' })
  @Allow()
  forwardedProps?: unknown;

  @ApiPropertyOptional({ description: 'Accepted, not used' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_AG_UI_ENTRIES)
  resume?: unknown[];
}
