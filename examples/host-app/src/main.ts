import { NestFactory } from '@nestjs/core';
import { AgentService } from 'nest-agent-orchestrator';
import { AppModule } from './app.module';

/** Boots the host, runs one turn, prints how it settled (one JSON line) and exits. */
async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, {
    logger: ['error', 'warn'],
  });
  app.enableShutdownHooks();
  const agent = app.get(AgentService);

  // A second message sent before the first is answered waits (agent:queue says so) and is
  // answered in the same turn.
  const [settlement] = await Promise.all([
    agent.handleMessage({ sessionId: 'chat-1', userId: 'alice', content: 'Where is order 42?' }),
    agent.handleMessage({ sessionId: 'chat-1', userId: 'alice', content: 'It was a gift.' }),
  ]);
  console.log(JSON.stringify(settlement));
  await app.close();
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
