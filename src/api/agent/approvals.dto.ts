import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, MaxLength } from 'class-validator';
import { IsIdentifier, MAX_REASON_LENGTH } from './agent.dto';

/** Body of `POST /agent/sessions/:sessionId/approvals/:callId`: the decision (`by` is the caller). */
export class ApproveDto {
  @ApiProperty({ description: 'true: the call runs; false: it does not, and the model is told' })
  @IsBoolean()
  approved!: boolean;

  @ApiPropertyOptional({
    maxLength: MAX_REASON_LENGTH,
    description: 'Why; told to the model when the call is denied',
  })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_REASON_LENGTH)
  reason?: string;
}

/** Payload of the socket `approve` event. */
export class SocketApproveDto extends ApproveDto {
  @IsIdentifier()
  sessionId!: string;

  @IsIdentifier()
  callId!: string;
}

/** One tool call waiting for approval, in `GET .../approvals`. */
export class PendingApprovalResponse {
  @ApiProperty({ description: 'The agent id of the call (decide it with this id)' })
  callId!: string;

  @ApiProperty()
  turnId!: string;

  @ApiProperty({ description: 'The tool' })
  name!: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The arguments it would run with',
  })
  args!: unknown;

  @ApiProperty({ description: 'When it started waiting (ISO 8601)' })
  requestedAt!: string;
}

/** `200` of `GET /agent/sessions/:sessionId/approvals`. */
export class ApprovalsResponse {
  @ApiProperty({ type: [PendingApprovalResponse], description: 'Oldest first' })
  approvals!: PendingApprovalResponse[];
}

/** `200` of `POST /agent/sessions/:sessionId/approvals/:callId`. */
export class DecidedResponse {
  @ApiProperty({ enum: [true] })
  decided!: true;
}
