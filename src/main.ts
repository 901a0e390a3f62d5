import 'reflect-metadata';
import { ConsoleLogger, Logger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { setupServer, startTracingSdk, type TracingSdk } from './server';
import { AppModule } from './app.module';
import { APP_CONFIG, ConfigError, loadAppConfig, type AppConfig } from './app.config';

/**
 * The console logger (`LOG_FORMAT=json`: Nest's JSON mode, one object per line), except that
 * Nest's own report of a start-up failure (context `ExceptionHandler`, with a stack trace) is
 * left out: `bootstrap` prints that failure as one line naming what to fix.
 */
class ServerLogger extends ConsoleLogger {
  override error(message: unknown, ...rest: unknown[]): void {
    if (rest[rest.length - 1] === 'ExceptionHandler') return;
    super.error(message, ...rest);
  }
}

/** The validated environment, or exit 1 with one line naming the bad variable. */
function configOrExit(): AppConfig {
  try {
    return loadAppConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

/**
 * On SIGTERM / SIGINT: closes the application (stops accepting, drains the agent, S9, closes
 * sockets), then flushes the traces, then exits (0, or 1 when closing failed). A second signal
 * while closing is ignored.
 */
function closeOnSignals(app: INestApplication, tracing: TracingSdk | undefined): void {
  let closing = false;
  const close = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    const logger = new Logger('Server');
    let code = 0;
    try {
      await app.close();
    } catch (error) {
      logger.error(`Shutdown failed: ${String(error)}`);
      code = 1;
    }
    await tracing
      ?.shutdown()
      .catch((error: unknown) => logger.warn(`Could not flush the traces: ${String(error)}`));
    process.exit(code);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void close());
}

/**
 * Starts the server: validates the environment (a bad value stops start-up with one line
 * naming the variable), starts tracing when an OTLP endpoint is set (before the application,
 * so the agent's spans have somewhere to go), listens, and on SIGTERM / SIGINT shuts down
 * gracefully.
 */
async function bootstrap(): Promise<void> {
  const settings = configOrExit();
  const tracing = settings.tracing ? startTracingSdk(settings.tracing) : undefined;
  const app = await NestFactory.create(AppModule, {
    bodyParser: false,
    abortOnError: false,
    logger: new ServerLogger({ json: settings.logFormat === 'json' }),
  });
  setupServer(app);
  closeOnSignals(app, tracing);
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
