import 'reflect-metadata';
import { ConsoleLogger, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { setupServer } from './server';
import { AppModule } from './app.module';
import { APP_CONFIG, ConfigError, loadAppConfig, type AppConfig } from './app.config';

/**
 * The console logger, except that Nest's own report of a start-up failure (context
 * `ExceptionHandler`, with a stack trace) is left out: `bootstrap` prints that failure as one
 * line naming what to fix.
 */
class ServerLogger extends ConsoleLogger {
  override error(message: unknown, ...rest: unknown[]): void {
    if (rest[rest.length - 1] === 'ExceptionHandler') return;
    super.error(message, ...rest);
  }
}

/**
 * Starts the server: validates the environment (a bad value stops start-up with one line
 * naming the variable), listens, and on SIGTERM / SIGINT shuts down gracefully: stops
 * accepting, drains the agent (contract S9), closes sockets, exits 0.
 */
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
  const app = await NestFactory.create(AppModule, {
    bodyParser: false,
    abortOnError: false,
    logger: new ServerLogger(),
  });
  setupServer(app);
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  const config = app.get<AppConfig>(APP_CONFIG);
  await app.listen(config.port, config.host);
  const logger = new Logger('Server');
  logger.log(`Listening on ${await app.getUrl()}`);
  if (config.adminTokenGenerated) {
    logger.log(`Admin token (generated, set AGENT_ADMIN_TOKEN to fix it): ${config.adminToken}`);
  }
}

bootstrap().catch((error: unknown) => {
  const message = (error as Error)?.message ?? String(error);
  process.stderr.write(`Start-up failed: ${message.split('\n')[0]}\n`);
  process.exit(1);
});
