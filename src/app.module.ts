import { Global, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { TerminusModule } from '@nestjs/terminus';
import { AgentModule } from './agent';
import { HealthController } from './api';
import { APP_CONFIG, loadAppConfig, type AppConfig } from './app.config';
import { agentOptionsFromConfig } from './app.agent-options';

/** Holds the configuration read once from the environment. */
@Global()
@Module({
  providers: [{ provide: APP_CONFIG, useFactory: (): AppConfig => loadAppConfig() }],
  exports: [APP_CONFIG],
})
export class AppConfigModule {}

/** The server's composition root, configured from the environment (interface.md section 2). */
@Module({
  imports: [
    AppConfigModule,
    EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
    TerminusModule.forRoot({ logger: false }),
    AgentModule.forRootAsync({
      imports: [AppConfigModule],
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => agentOptionsFromConfig(config),
    }),
  ],
  controllers: [HealthController],
})
export class AppModule {}
