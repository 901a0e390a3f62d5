import { Body, Controller, Headers, Post, Res } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { withIngress } from '../../contracts';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import type { HttpResponse } from '../http/http-types';
import { LAST_EVENT_ID_HEADER } from '../http/sse';
import { RunAgentInputDto } from './ag-ui.dto';
import { AgUiService } from './ag-ui.service';

/** AG-UI (README, "AG-UI"). */
@ApiTags('ag-ui')
@ApiErrorResponses()
@AgentApiRoutes()
@Controller('ag-ui')
export class AgUiController {
  constructor(private readonly agUi: AgUiService) {}

  @Post()
  @ApiOperation({ summary: 'AG-UI RunAgentInput in, AG-UI events out (SSE)' })
  @ApiHeader(LAST_EVENT_ID_HEADER)
  @ApiOkResponse({ description: 'SSE, AG-UI events' })
  run(
    @Body() body: RunAgentInputDto,
    @Res() res: HttpResponse,
    @Headers('last-event-id') lastEventId?: string,
    @Headers('traceparent') traceparent?: string,
  ): Promise<void> {
    return withIngress('rest', traceparent, () => this.agUi.run(body, res, lastEventId));
  }
}
