import { Controller, Get, HttpStatus, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import { AgentHealthIndicator, type HttpResponse } from '../api';

/**
 * `GET /health`: liveness and readiness of the store, the queue and the model provider, from
 * `AgentHealthIndicator` (each probe bounded, so the answer comes within 2 s whatever hangs).
 * Never rate limited: probes must not be turned away.
 */
@ApiTags('operations')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly agent: AgentHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  @ApiOperation({ summary: 'Liveness and readiness (store, queue, model provider, MCP servers)' })
  async check(@Res({ passthrough: true }) response: HttpResponse): Promise<HealthCheckResult> {
    try {
      return await this.health.check([
        () => this.agent.store(),
        () => this.agent.queue(),
        () => this.agent.model(),
        () => this.agent.mcp(),
      ]);
    } catch (error) {
      // Down: 503 with the same report as when up, so probes and people read one shape.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      response.status(HttpStatus.SERVICE_UNAVAILABLE);
      return error.getResponse() as HealthCheckResult;
    }
  }
}
