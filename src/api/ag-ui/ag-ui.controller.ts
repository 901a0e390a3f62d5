import { Body, Controller, Headers, Post, Res } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { withIngress } from '../../contracts';
import { ApiErrorResponses } from '../http/api-docs';
import { AgentApiRoutes } from '../http/api-routes.decorator';
import type { HttpResponse } from '../http/http-types';
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
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'An SSE id of this stream (`<turnId>:<seq>`): continue after that event',
  })
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
