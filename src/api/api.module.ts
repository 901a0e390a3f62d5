import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import {
  ThrottlerStorageService,
  getOptionsToken,
  getStorageToken,
  type ThrottlerModuleOptions,
} from '@nestjs/throttler';
import { AgentApiService } from './agent/agent-api.service';
import { MessagesController } from './agent/messages.controller';
import { SessionsController } from './agent/sessions.controller';
import {
  API_MODULE_OPTIONS,
  API_OPTIONS,
  ApiConfigurableModule,
  THROTTLERS,
  resolveApiOptions,
  type ResolvedApiOptions,
} from './api.module-definition';
import { AdminAuthGuard } from './auth/admin-auth.guard';
import { AdminTokenVerifier } from './auth/admin-token';
import { DashboardController } from './dashboard/dashboard.controller';
import { HealthController } from './health/health.controller';
import { ApiExceptionFilter } from './http/api-exception.filter';
import { ApiThrottlerGuard } from './http/api-throttler.guard';
import { HttpShutdown } from './http/http-shutdown';
import { RateLimiter } from './http/rate-limiter';
import { createValidationPipe } from './http/validation';
import { AgentMetrics } from './metrics/agent-metrics.service';
import { MetricsController } from './metrics/metrics.controller';
import { AgentEventsBridge } from './socket/agent-events.bridge';
import { AgentGateway } from './socket/agent.gateway';
import { QueueCoalescer } from './socket/queue-coalescer';
import { SocketDoors } from './socket/socket-doors';

/**
 * Two throttlers: `public` for /health, /metrics, /docs; `admin` (generous) for /agent with the
 * right token. Wrong tokens and the Socket.IO doors are counted by `RateLimiter`.
 */
function throttlerOptions(options: ResolvedApiOptions): ThrottlerModuleOptions {
  const { rateLimits } = options;
  return {
    throttlers: [
      { name: THROTTLERS.public, limit: rateLimits.public.limit, ttl: rateLimits.public.ttlMs },
      { name: THROTTLERS.admin, limit: rateLimits.admin.limit, ttl: rateLimits.admin.ttlMs },
    ],
  };
}

/**
 * The server's outside (README.md, "REST API" and "Socket.IO (namespace `/agent`)"): REST
 * controllers over `AgentService`, the Socket.IO gateway on `/agent`, the admin-token guard (secure
 * by default: every route but the `@Public()` ones needs the token), rate limits, validation, one
 * error shape, `/health`, `/metrics`. Needs `AgentModule` (global) and `EventEmitterModule` in the
 * application, and `setupApi(app)` before listening (body limit, OpenAPI, Socket.IO adapter).
 *
 * `ApiModule.forRoot({ adminToken })` or `ApiModule.forRootAsync({ inject, useFactory })`.
 */
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [
    MessagesController,
    SessionsController,
    HealthController,
    MetricsController,
    DashboardController,
  ],
  providers: [
    { provide: API_OPTIONS, useFactory: resolveApiOptions, inject: [API_MODULE_OPTIONS] },
    { provide: getOptionsToken(), useFactory: throttlerOptions, inject: [API_OPTIONS] },
    { provide: getStorageToken(), useFactory: () => new ThrottlerStorageService() },
    // Guards run in this order: the token first, so that wrong tokens count against the `auth`
    // limit only and never use up the `admin` limit of the operator's address.
    { provide: APP_GUARD, useClass: AdminAuthGuard },
    { provide: APP_GUARD, useClass: ApiThrottlerGuard },
    { provide: APP_PIPE, useFactory: createValidationPipe },
    { provide: APP_FILTER, useClass: ApiExceptionFilter },
    AdminTokenVerifier,
    RateLimiter,
    AgentApiService,
    AgentMetrics,
    SocketDoors,
    AgentGateway,
    QueueCoalescer,
    AgentEventsBridge,
    HttpShutdown,
  ],
  exports: [API_OPTIONS, AgentMetrics, AgentApiService],
})
export class ApiModule extends ApiConfigurableModule {}
