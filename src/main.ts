import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { APP_CONFIG, ConfigError, loadAppConfig, type AppConfig } from './app.config';

async function bootstrap(): Promise<void> {
  try {
    loadAppConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const app = await NestFactory.create(AppModule, { bufferLogs: false });
  app.enableShutdownHooks();
  const config = app.get<AppConfig>(APP_CONFIG);
  await app.listen(config.port, config.host);
  const logger = new Logger('Server');
  logger.log(`Listening on ${await app.getUrl()}`);
  if (config.adminTokenGenerated) {
    logger.log(`Admin token (generated, set AGENT_ADMIN_TOKEN to fix it): ${config.adminToken}`);
  }
}

bootstrap().catch((error: unknown) => {
  process.stderr.write(`Start-up failed: ${(error as Error)?.message ?? String(error)}\n`);
  process.exit(1);
});
