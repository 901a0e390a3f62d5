import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { AgentApiModule } from 'nest-agent-orchestrator/api';
import { AppModule } from './app.module';
import { ChatController } from './chat.controller';

/**
 * The host as an HTTP application: the agent of `AppModule`, the agent's REST routes, Socket.IO
 * gateway and dashboard under `<prefix>/agent` (`AgentApiModule`), and the host's own routes.
 */
@Module({
  imports: [
    AppModule,
    AgentApiModule.forRootAsync({
      path: 'agent',
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        adminToken: config.getOrThrow<string>('AGENT_ADMIN_TOKEN'),
      }),
    }),
  ],
  controllers: [ChatController],
})
export class HttpModule {}
