import { NestFactory } from '@nestjs/core';
import { AgentIoAdapter } from 'nest-agent-orchestrator/api';
import { HttpModule } from './http.module';

/** Serves the host over HTTP: its routes under /api, the agent's under /api/agent. */
async function serve(): Promise<void> {
  const app = await NestFactory.create(HttpModule);
  app.setGlobalPrefix('api');
  app.useWebSocketAdapter(new AgentIoAdapter(app));
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3001), '127.0.0.1');
  console.log(`Listening on ${await app.getUrl()}: dashboard at /api/agent`);
}

serve().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
