import { Body, Controller, Headers, HttpCode, HttpStatus, Post, Query, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { withIngress } from '../../contracts';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import type { HttpResponse } from '../http/http-types';
import { AcceptedResponse, SettledResponse } from './agent-response.dto';
import { MessageDto, WaitQueryDto } from './agent.dto';
import { mapIncomingMessage } from './agent.mapping';
import { AgentApiService } from './agent-api.service';

/** `POST /agent/messages` (README.md, "REST API"; settlement rules: docs/behaviour.md S1). */
@ApiTags('agent')
@ApiErrorResponses()
@AgentApiRoutes()
@Controller('messages')
export class MessagesController {
  constructor(private readonly api: AgentApiService) {}

  @Post()
  @HttpCode(HttpStatus.ACCEPTED)
  @ApiOperation({ summary: 'Hand an input to the agent (S1)' })
  @ApiAcceptedResponse({ type: AcceptedResponse, description: 'Accepted (without ?wait=true)' })
  @ApiOkResponse({ type: SettledResponse, description: 'Settled (with ?wait=true)' })
  post(
    @Body() body: MessageDto,
    @Query() query: WaitQueryDto,
    @Res({ passthrough: true }) response: HttpResponse,
    @Headers('traceparent') traceparent?: string,
  ): Promise<AcceptedResponse | SettledResponse> {
    if (query.wait) response.status(HttpStatus.OK);
    // A W3C `traceparent` header makes the input's trace a child of the caller's.
    return withIngress('rest', traceparent, () =>
      this.api.submit(mapIncomingMessage(body), query.wait === true),
    );
  }
}
