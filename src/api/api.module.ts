import {
  Inject,
  Module,
  type DynamicModule,
  type MiddlewareConsumer,
  type NestModule,
  type Provider,
} from '@nestjs/common';
import { RouterModule, type Routes } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import {
  ThrottlerStorageService,
  getOptionsToken,
  getStorageToken,
  type ThrottlerModuleOptions,
} from '@nestjs/throttler';
import { AgUiController } from './ag-ui/ag-ui.controller';
import { AgUiService } from './ag-ui/ag-ui.service';
import { AgentApiService } from './agent/agent-api.service';
import { MessagesController } from './agent/messages.controller';
import { SessionsController } from './agent/sessions.controller';
import { ApprovalsController } from './agent/approvals.controller';
import { AgentBackend } from './agent-backend';
import {
  API_ASYNC_OPTIONS_TYPE,
  API_MODULE_OPTIONS,
  API_OPTIONS,
  API_OPTIONS_TYPE,
  API_SHAPE,
  ApiConfigurableModule,
  THROTTLERS,
  resolveApiOptions,
  resolveApiShape,
  type AgentApiModuleExtras,
  type AgentApiModuleOptions,
  type ResolvedApiOptions,
  type ResolvedApiShape,
} from './api.module-definition';
import { AdminAuthGuard } from './auth/admin-auth.guard';
import { AdminTokenVerifier } from './auth/admin-token';
import { API_AUTH_GUARD } from './auth/agent-api.guard';
import { DashboardController } from './dashboard/dashboard.controller';
import { AgentHealthIndicator } from './health/agent-health.indicator';
import { jsonBodies } from './http/json-bodies';
import { RateLimiter } from './http/rate-limiter';
import { AgentMetrics } from './metrics/agent-metrics.service';
import { AgentEventsBridge } from './socket/agent-events.bridge';
import { AgentGateway, agentGatewayFor } from './socket/agent.gateway';
import { TurnFeed } from './replay/turn-feed';
import { RemoteTurns } from './replay/remote-turns';
import { TurnReplayBuffer } from './replay/turn-replay.buffer';
import { TurnStreams } from './replay/turn-streams';
import { QueueCoalescer } from './socket/queue-coalescer';
import { SocketDoors } from './socket/socket-doors';
import { UiChatController } from './ui-chat/ui-chat.controller';
import { UiChatService } from './ui-chat/ui-chat.service';

/**
 * Two throttlers: `admin` for the module's routes and sockets, `public` for what a server adds
 * (`/metrics`, `/docs`). Wrong tokens and the Socket.IO doors are counted by `RateLimiter`.
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

/** The dashboard's own module, so that it can have a route of its own. */
@Module({})
export class AgentDashboardModule {}

/** The module's definition for its shape: routes, gateway, dashboard. */
function shaped(definition: DynamicModule, extras: AgentApiModuleExtras): DynamicModule {
  const shape = resolveApiShape(extras);
  const gateway = agentGatewayFor(shape.namespace);
  const shapeProvider: Provider = { provide: API_SHAPE, useValue: shape };
  const routes: Routes = [{ path: shape.path, module: AgentApiModule }];
  const imports = [...(definition.imports ?? []), TerminusModule.forRoot({ logger: false })];
  if (shape.dashboard !== false) {
    routes.push({ path: shape.dashboard, module: AgentDashboardModule });
    imports.push({
      module: AgentDashboardModule,
      controllers: [DashboardController],
      providers: [shapeProvider],
    });
  }
  imports.push(RouterModule.register(routes));
  const providers: Provider[] = [
    ...(definition.providers ?? []),
    shapeProvider,
    {
      provide: API_OPTIONS,
      useFactory: (options: AgentApiModuleOptions, { authGuard }: ResolvedApiShape) =>
        resolveApiOptions(options, authGuard !== undefined),
      inject: [API_MODULE_OPTIONS, API_SHAPE],
    },
    { provide: API_AUTH_GUARD, useClass: shape.authGuard ?? AdminAuthGuard },
    gateway,
    { provide: AgentGateway, useExisting: gateway },
  ];
  return { ...definition, imports, providers };
}

/**
 * The agent's outside as a module a host imports (`nest-agent-orchestrator/api`; README.md,
 * "Embedding the API"): the REST controllers under `path` (`<path>/messages`,
 * `<path>/sessions/...`), the Socket.IO gateway on `namespace`, the dashboard, the metrics
 * (`AgentMetrics`, on the host's `metricsRegistry` if given) and `AgentHealthIndicator`.
 * Its guard (the admin token, or the host's `authGuard`), rate limits, validation pipe, error
 * filter and JSON body parser apply to its own routes only; it registers nothing app-wide.
 * It finds `AgentModule` wherever the host imported it (global or not) and needs
 * `EventEmitterModule.forRoot()` in the application, as `AgentModule` does.
 *
 * `AgentApiModule.forRoot({ adminToken })` or `AgentApiModule.forRootAsync({ inject,
 * useFactory })`, with `path`, `namespace`, `dashboard` and `authGuard` beside them.
 */
@Module({
  providers: [
    { provide: getOptionsToken(), useFactory: throttlerOptions, inject: [API_OPTIONS] },
    { provide: getStorageToken(), useFactory: () => new ThrottlerStorageService() },
    AdminTokenVerifier,
    RateLimiter,
    AgentBackend,
    AgentApiService,
    AgentMetrics,
    AgentHealthIndicator,
    SocketDoors,
    QueueCoalescer,
    AgentEventsBridge,
    // The turns' streams kept for resuming clients (README, "Resuming a turn's stream").
    { provide: TurnReplayBuffer, useFactory: () => new TurnReplayBuffer() },
    {
      provide: TurnFeed,
      useFactory: (b: TurnReplayBuffer) => new TurnFeed(b),
      inject: [TurnReplayBuffer],
    },
    RemoteTurns,
    TurnStreams,
    UiChatService,
    AgUiService,
  ],
  controllers: [
    MessagesController,
    SessionsController,
    ApprovalsController,
    UiChatController,
    AgUiController,
  ],
  exports: [
    API_OPTIONS,
    API_SHAPE,
    AgentMetrics,
    AgentApiService,
    AgentHealthIndicator,
    AgentBackend,
    RateLimiter,
    TurnReplayBuffer,
    getOptionsToken(),
    getStorageToken(),
  ],
})
export class AgentApiModule extends ApiConfigurableModule implements NestModule {
  constructor(@Inject(API_OPTIONS) private readonly options: ResolvedApiOptions) {
    super();
  }

  static override forRoot(options: typeof API_OPTIONS_TYPE): DynamicModule {
    return shaped(super.forRoot(options), options);
  }

  static override forRootAsync(options: typeof API_ASYNC_OPTIONS_TYPE): DynamicModule {
    return shaped(super.forRootAsync(options), options);
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer
      .apply(...jsonBodies(this.options.bodyLimit))
      .forRoutes(
        MessagesController,
        SessionsController,
        ApprovalsController,
        UiChatController,
        AgUiController,
      );
  }
}
