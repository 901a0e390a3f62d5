import { Global, Logger, Module } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { TerminusModule } from '@nestjs/terminus';
import { AgentModule } from './agent';
import { HealthController } from './api';
import { APP_CONFIG, loadAppConfig, type AppConfig } from './app.config';
import { OpenAiCompatibleProvider } from './llm';

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
      useFactory: (config: AppConfig) => {
        const logger = new Logger('AppModule');
        if (!config.llm) {
          logger.warn(
            'No LLM_BASE_URL set: no model provider is configured; turns answer with a [system] notice saying how to configure one',
          );
          return {};
        }
        logger.log(
          `Model provider: ${config.llm.baseURL} (model ${config.llm.model ?? 'default'})`,
        );
        return {
          llmProvider: new OpenAiCompatibleProvider({
            baseURL: config.llm.baseURL,
            apiKey: config.llm.apiKey,
            defaultModel: config.llm.model ?? 'gpt-4o-mini',
          }),
        };
      },
    }),
  ],
  controllers: [HealthController],
})
export class AppModule {}
