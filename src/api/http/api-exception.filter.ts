import { Catch, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { toErrorBody } from './api-error';
import type { HttpResponse } from './http-types';

/**
 * Answers every HTTP error in one JSON shape (`ErrorBody`): validation, auth, rate limits,
 * body-parser failures (malformed JSON 400, oversized 413), agent errors, and anything
 * unexpected as a logged 500 without internals. Socket handlers ack their own errors.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Api');

  catch(exception: unknown, host: ArgumentsHost): void {
    const body = toErrorBody(exception);
    if (body.statusCode >= 500) {
      this.logger.error(
        `Unhandled ${host.getType()} error: ${(exception as Error)?.stack ?? String(exception)}`,
      );
    }
    if (host.getType() !== 'http') return;
    const response = host.switchToHttp().getResponse<HttpResponse>();
    if (response.headersSent) {
      response.end();
      return;
    }
    response.status(body.statusCode).json(body);
  }
}
