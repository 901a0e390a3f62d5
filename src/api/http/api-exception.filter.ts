import { Catch, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { StoreMethodMissingError, StoreUnavailableError } from '../../contracts';
import { retryAfterOf, toErrorBody } from './api-error';
import { errorForLog, escapeForLog } from './escape-for-log';
import type { HttpResponse } from './http-types';

/**
 * Logs what a failed request or socket event says about the server: an unavailable store as
 * a warning with the driver's error (its cause), a host store that lacks a method as a
 * warning naming it, anything unexpected as an error with its stack. Messages may carry user values, so they are escaped; the stack frames are code paths.
 */
export function logFailure(logger: Logger, where: string, exception: unknown, status: number) {
  if (exception instanceof StoreUnavailableError) {
    const cause = (exception as { cause?: unknown }).cause;
    logger.warn(`${where}: ${exception.message}${cause ? `: ${errorForLog(cause)}` : ''}`);
    return;
  }
  if (status < 500) return;
  // A host store without a method a route needs (501): the answer says so; no stack to read.
  if (exception instanceof StoreMethodMissingError) {
    logger.warn(`${where}: ${exception.message}`);
    return;
  }
  logger.error(`${where}: unhandled ${errorForLog(exception)}${framesOf(exception)}`);
}

/**
 * The stack frames of an error without its header: the header repeats the message, which may
 * span lines, so it is cut by its exact text; a stack that does not start with it is left out.
 */
function framesOf(exception: unknown): string {
  const stack = (exception as Error)?.stack;
  if (typeof stack !== 'string') return '';
  const header = String(exception);
  return stack.startsWith(header) ? stack.slice(header.length) : '';
}

/**
 * Answers every HTTP error in one JSON shape (`ErrorBody`): validation, auth, rate limits,
 * body-parser failures (malformed JSON 400, oversized 413), agent errors, an unavailable store
 * (503 with `Retry-After`), and anything unexpected as a logged 500 without internals. Socket
 * handlers ack their own errors.
 */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Api');

  catch(exception: unknown, host: ArgumentsHost): void {
    const body = toErrorBody(exception);
    if (host.getType() !== 'http') {
      logFailure(this.logger, `${host.getType()} handler`, exception, body.statusCode);
      return;
    }
    const http = host.switchToHttp();
    const request = http.getRequest<{ method?: string; originalUrl?: string; url?: string }>();
    const where = `${request.method ?? ''} ${escapeForLog(request.originalUrl ?? request.url)}`;
    logFailure(this.logger, where, exception, body.statusCode);
    const response = http.getResponse<HttpResponse>();
    if (response.headersSent) {
      response.end();
      return;
    }
    const retryAfter = retryAfterOf(exception);
    if (retryAfter !== undefined) response.setHeader('Retry-After', retryAfter);
    response.status(body.statusCode).json(body);
  }
}
