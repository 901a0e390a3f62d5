import { Body, Controller, Get, Headers, Param, Post, Res } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { withIngress } from '../../contracts';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import type { HttpResponse } from '../http/http-types';
import { SessionIdPipe } from '../http/validation';
import { LAST_EVENT_ID_HEADER } from '../http/sse';
import { UiChatRequestDto } from './ui-chat.dto';
import { UiChatService } from './ui-chat.service';

/** The AI SDK's UI message stream (README, "AI SDK UI message stream"). */
@ApiTags('ui-chat')
@ApiErrorResponses()
@AgentApiRoutes()
@Controller('ui/chat')
export class UiChatController {
  constructor(private readonly chats: UiChatService) {}

  @Post()
  @ApiOperation({ summary: "DefaultChatTransport's request: streams the turn that settles it" })
  @ApiHeader(LAST_EVENT_ID_HEADER)
  @ApiOkResponse({ description: 'SSE, UI message stream protocol v1' })
  chat(
    @Body() body: UiChatRequestDto,
    @Res() res: HttpResponse,
    @Headers('last-event-id') lastEventId?: string,
    @Headers('traceparent') traceparent?: string,
  ): Promise<void> {
    return withIngress('rest', traceparent, () => this.chats.chat(body, res, lastEventId));
  }

  @Get(':sessionId/stream')
  @ApiOperation({ summary: "The transport's resume: the chat's active stream, 204 when none" })
  @ApiHeader(LAST_EVENT_ID_HEADER)
  @ApiOkResponse({ description: 'SSE, UI message stream protocol v1' })
  resume(
    @Param('sessionId', SessionIdPipe) sessionId: string,
    @Res() res: HttpResponse,
    @Headers('last-event-id') lastEventId?: string,
  ): Promise<void> {
    return this.chats.resume(sessionId, res, lastEventId);
  }
}
