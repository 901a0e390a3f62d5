import { Global, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { AgentModule } from './agent';
import { ApiModule } from './api';
import { APP_CONFIG, loadAppConfig, type AppConfig } from './app.config';
import { agentOptionsFromConfig } from './app.agent-options';

/** Holds the configuration read once from the environment. */
@Global()
@Module({
  providers: [{ provide: APP_CONFIG, useFactory: (): AppConfig => loadAppConfig() }],
  exports: [APP_CONFIG],
})
export class AppConfigModule {}

/**
 * The server's composition root, configured from the environment (README.md, "Configuration
 * (server)"). Build the application with `bodyParser: false` and call `setupApi(app)` before
 * listening.
 */
@Module({
  imports: [
    AppConfigModule,
    EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
    AgentModule.forRootAsync({
      isGlobal: true,
      imports: [AppConfigModule],
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => agentOptionsFromConfig(config),
    }),
    ApiModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({
        adminToken: config.adminToken,
        http: config.http,
        rateLimits: config.rateLimits,
      }),
    }),
  ],
})
export class AppModule {}
