import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { Registry } from 'prom-client';
import { THROTTLERS } from '../api.module-definition';
import { Public } from '../auth/auth.decorators';
import { AgentMetrics } from './agent-metrics.service';

/** `GET /metrics`: Prometheus text (public, rate limited). */
@ApiTags('operations')
@Public()
@SkipThrottle({ [THROTTLERS.admin]: true })
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: AgentMetrics) {}

  @Get()
  @Header('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE)
  @Header('Cache-Control', 'no-store')
  @ApiOperation({ summary: 'Prometheus metrics' })
  @ApiProduces(Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOkResponse({ description: 'Prometheus text exposition', schema: { type: 'string' } })
  metricsText(): Promise<string> {
    return this.metrics.render();
  }
}
