import { Controller, Get, Header, UseGuards } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import { Registry } from 'prom-client';
import { AgentMetrics, ApiThrottlerGuard, THROTTLERS } from '../api';

/** `GET /metrics`: Prometheus text (public, rate limited by the `public` limit). */
@ApiTags('operations')
@UseGuards(ApiThrottlerGuard)
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
