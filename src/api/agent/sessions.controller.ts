import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpStatus,
  Param,
  Post,
  Put,
  Query,
} from '@nestjs/common';
import {
  ApiNoContentResponse,
  ApiNotFoundResponse,
  ApiNotImplementedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  ApiUnprocessableEntityResponse,
} from '@nestjs/swagger';
import type { Actor, TokenUsageEvent } from '../../contracts';
import { Caller } from '../auth/auth.decorators';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import { SessionIdPipe } from '../http/validation';
import {
  ClearedResponse,
  ErrorResponse,
  HistoryResponse,
  QueueResponse,
  SessionListResponse,
  SessionResponse,
  StoppedAllResponse,
  StoppedResponse,
  UsageResponse,
} from './agent-response.dto';
import {
  AbortAllDto,
  AbortDto,
  ClearDto,
  HISTORY_PAGE,
  HistoryQueryDto,
  ModelRefDto,
  SessionSettingsDto,
} from './agent.dto';
import { SessionListQueryDto } from './session-list.dto';
import { mapAbortOptions, mapModelRef, mapSessionSettings } from './agent.mapping';
import { AgentApiService } from './agent-api.service';

/** The `/agent/sessions` routes (README.md, "REST API"; rules: docs/behaviour.md S3, S4, S6-S8). */
@ApiTags('agent')
@ApiErrorResponses()
@AgentApiRoutes()
@Controller('sessions')
export class SessionsController {
  constructor(private readonly api: AgentApiService) {}

  @Post('clear')
  @HttpCode(HttpStatus.OK)
  @ApiOperation({ summary: 'Clear the history of sessions, or of all (S4)' })
  @ApiOkResponse({ type: ClearedResponse })
  clear(@Body() body: ClearDto): Promise<ClearedResponse> {
    // No body at all arrives as undefined (the pipe validates it as {}): clear everything.
    return this.api.clear(body?.sessionIds, body?.reason);
  }

  @Post('abort')
  @HttpCode(HttpStatus.OK)
  @ApiOperation({
    summary: 'Stop every running turn ("stop all", S3 per session); `by` is the caller',
  })
  @ApiOkResponse({ type: StoppedAllResponse })
  abortAll(
    @Body() body: AbortAllDto,
    @Caller() caller: Actor | undefined,
  ): Promise<StoppedAllResponse> {
    return this.api.abortAll(mapAbortOptions(body, caller));
  }

  @Post(':sessionId/abort')
  @HttpCode(HttpStatus.OK)
  @ApiOperation({ summary: "Stop the session's running turn (S3); `by` is the caller" })
  @ApiOkResponse({ type: StoppedResponse })
  abort(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Body() body: AbortDto,
    @Caller() caller: Actor | undefined,
  ): Promise<StoppedResponse> {
    return this.api.abort(sessionId, mapAbortOptions(body, caller));
  }

  @Put(':sessionId/model')
  @HttpCode(HttpStatus.NO_CONTENT)
  @ApiOperation({ summary: "Assign the session's conversation model (S6)" })
  @ApiNoContentResponse({ description: 'Assigned' })
  @ApiNotFoundResponse({ type: ErrorResponse, description: 'No such session settings' })
  @ApiUnprocessableEntityResponse({ type: ErrorResponse, description: 'Model refused' })
  assignModel(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Body() body: ModelRefDto,
  ): Promise<void> {
    return this.api.assignModel(sessionId, mapModelRef(body));
  }

  @Get(':sessionId')
  @ApiOperation({ summary: "A session's state, waiting count, settings and last turn" })
  @ApiOkResponse({ type: SessionResponse })
  @ApiNotFoundResponse({ type: ErrorResponse, description: 'Unknown session' })
  session(@Param('sessionId', SessionIdPipe) sessionId: string): Promise<SessionResponse> {
    return this.api.session(sessionId);
  }

  @Put(':sessionId')
  @ApiOperation({
    summary: "Create or update a session's settings (a model may be set before the first message)",
  })
  @ApiOkResponse({ type: SessionResponse })
  @ApiUnprocessableEntityResponse({ type: ErrorResponse, description: 'Model not served' })
  updateSession(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Body() body: SessionSettingsDto,
  ): Promise<SessionResponse> {
    return this.api.updateSession(sessionId, mapSessionSettings(body));
  }

  @Delete(':sessionId')
  @HttpCode(HttpStatus.NO_CONTENT)
  @ApiOperation({ summary: 'Delete a session once it has settled (S7)' })
  @ApiNoContentResponse({ description: 'Deleted' })
  remove(@Param('sessionId', SessionIdPipe) sessionId: string): Promise<void> {
    return this.api.deleteSession(sessionId);
  }

  @Get(':sessionId/queue')
  @ApiOperation({ summary: "The session's waiting inputs (S8)" })
  @ApiOkResponse({ type: QueueResponse })
  queue(@Param('sessionId', SessionIdPipe) sessionId: string): QueueResponse {
    return this.api.queue(sessionId);
  }

  @Get(':sessionId/usage')
  @ApiOperation({ summary: 'A token usage snapshot (token:request, no turnId)' })
  @ApiOkResponse({ type: UsageResponse })
  usage(@Param('sessionId', SessionIdPipe) sessionId: string): Promise<TokenUsageEvent> {
    return this.api.usage(sessionId);
  }

  @Get(':sessionId/history')
  @ApiOperation({
    summary:
      "The session's persisted messages with their metadata, a page at a time (newest first)",
  })
  @ApiOkResponse({ type: HistoryResponse })
  history(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Query() query: HistoryQueryDto,
  ): Promise<HistoryResponse> {
    return this.api.historyOf(sessionId, {
      limit: query.limit ?? HISTORY_PAGE.default,
      ...(query.before ? { before: query.before } : {}),
    });
  }

  // `GET /agent/sessions` has no parameter segment: `GET :sessionId` never takes it.
  @Get()
  @ApiOperation({
    summary: 'The sessions, most recent activity first, a page at a time (`nextCursor`)',
  })
  @ApiOkResponse({ type: SessionListResponse })
  @ApiNotImplementedResponse({
    type: ErrorResponse,
    description: 'The bound session store cannot list sessions (no listByActivity)',
  })
  list(@Query() query: SessionListQueryDto): Promise<SessionListResponse> {
    return this.api.sessions({
      ...(query.limit !== undefined ? { limit: query.limit } : {}),
      ...(query.cursor ? { cursor: query.cursor } : {}),
      ...(query.state ? { state: query.state } : {}),
    });
  }
}
