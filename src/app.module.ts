import { forwardRef, Global, Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { TerminusModule } from '@nestjs/terminus';
import { AgentModule } from './agent';
import { AgentApiModule, ApiExceptionFilter } from './api';
import { APP_CONFIG, loadAppConfig, type AppConfig } from './app.config';
import { agentOptionsFromConfig } from './app.agent-options';
import {
  HealthController,
  HttpShutdown,
  MetricsController,
  SERVER_OPTIONS,
  resolveServerOptions,
} from './server';

/** Holds the configuration read once from the environment. */
@Global()
@Module({
  providers: [{ provide: APP_CONFIG, useFactory: (): AppConfig => loadAppConfig() }],
  exports: [APP_CONFIG],
})
export class AppConfigModule {}

/** The agent of the server, in one process or distributed; made once per shape. */
const agentModules = new Map<boolean, DynamicModule>();

/**
 * The server's agent for the configuration: with `REDIS_URL` it is distributed (its wake
 * queue wired through `@nestjs/bullmq`), which `AgentModule` must know when its imports are
 * made, before its options factory runs. One module object per shape, so that every reference
 * to it in one application is the same module.
 */
function agentModule(config: AppConfig): DynamicModule {
  const distributed = config.distribution !== undefined;
  let made = agentModules.get(distributed);
  if (!made) {
    made = AgentModule.forRootAsync({
      imports: [AppConfigModule],
      inject: [APP_CONFIG],
      useFactory: (appConfig: AppConfig) => agentOptionsFromConfig(appConfig),
      distributed,
    });
    agentModules.set(distributed, made);
  }
  return made;
}

/**
 * The server's composition root, configured from the environment (README.md, "Configuration
 * (server)"): the agent (`AgentModule`) and its API (`AgentApiModule`, the same module a host
 * embeds, at `/agent` with the dashboard at `/`), plus what only the server has: `/health`,
 * `/metrics`, the OpenAPI document, HTTP limits, graceful shutdown and one error shape for
 * every route. Import it whole (a TestingModule may): the environment is read when the
 * application is compiled, not when this file is loaded, since the agent's import is resolved
 * then (`forwardRef`, Nest's lazily evaluated import). Build the application with
 * `bodyParser: false` and call `setupServer(app)` before listening.
 */
@Module({
  imports: [
    AppConfigModule,
    EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
    TerminusModule.forRoot({ logger: false }),
    forwardRef(() => agentModule(loadAppConfig())),
    AgentApiModule.forRootAsync({
      dashboard: { path: '' },
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({
        adminToken: config.adminToken,
        rateLimits: config.rateLimits,
      }),
    }),
  ],
  controllers: [HealthController, MetricsController],
  providers: [
    {
      provide: SERVER_OPTIONS,
      useFactory: (config: AppConfig) =>
        resolveServerOptions({ http: config.http, trustProxy: config.trustProxy }),
      inject: [APP_CONFIG],
    },
    HttpShutdown,
    // The server's own choice, not the module's: unknown routes answer in the same shape.
    { provide: APP_FILTER, useClass: ApiExceptionFilter },
  ],
})
export class AppModule {}
