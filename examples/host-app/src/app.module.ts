import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { AgentModule, OpenAiCompatibleProvider, SessionStore } from 'nest-agent-orchestrator';
import { MapSessionStore } from './map-session.store';
import { SupportAgent } from './support.agent';

@Module({
  imports: [
    ConfigModule.forRoot(),
    // The agent emits its events (agent:queue, token:usage, ...) on the host's emitter.
    EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
    AgentModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        llmProvider: new OpenAiCompatibleProvider({
          baseURL: config.getOrThrow<string>('LLM_BASE_URL'),
          apiKey: config.get<string>('LLM_API_KEY'),
          defaultModel: config.get<string>('LLM_MODEL', 'gpt-4o-mini'),
        }),
        systemPrompt: 'You are the support assistant of Example Ltd.',
        maxToolIterations: 4,
      }),
      // Bind your own port by token: providers given here win over the module's defaults.
      providers: [{ provide: SessionStore, useClass: MapSessionStore }],
    }),
  ],
  providers: [SupportAgent],
})
export class AppModule {}
