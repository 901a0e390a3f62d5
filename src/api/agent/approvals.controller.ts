import { Body, Controller, Get, HttpCode, HttpStatus, Param, Post } from '@nestjs/common';
import { ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Actor } from '../../contracts';
import { Caller } from '../auth/auth.decorators';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import { CallIdPipe, SessionIdPipe } from '../http/validation';
import { ErrorResponse } from './agent-response.dto';
import { AgentApiService } from './agent-api.service';
import { ApprovalsResponse, ApproveDto, DecidedResponse } from './approvals.dto';

/**
 * The `/agent/sessions/:sessionId/approvals` routes (README.md, "Human approval before a tool
 * runs"): the session's tool calls waiting for a person, and the decision on one.
 */
@ApiTags('agent')
@ApiErrorResponses()
@AgentApiRoutes()
@Controller('sessions')
export class ApprovalsController {
  constructor(private readonly api: AgentApiService) {}

  @Get(':sessionId/approvals')
  @ApiOperation({ summary: "The session's tool calls waiting for approval, oldest first" })
  @ApiOkResponse({ type: ApprovalsResponse })
  approvals(@Param('sessionId', SessionIdPipe) sessionId: string): Promise<ApprovalsResponse> {
    return this.api.approvals(sessionId);
  }

  @Post(':sessionId/approvals/:callId')
  @HttpCode(HttpStatus.OK)
  @ApiOperation({
    summary: 'Approve or deny a tool call waiting for approval; `by` is the caller',
  })
  @ApiOkResponse({ type: DecidedResponse })
  @ApiNotFoundResponse({ type: ErrorResponse, description: 'No such call waiting' })
  approve(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Param('callId', CallIdPipe) callId: string,
    @Body() body: ApproveDto,
    @Caller() caller: Actor | undefined,
  ): Promise<DecidedResponse> {
    return this.api.approve(sessionId, callId, body, caller);
  }
}
