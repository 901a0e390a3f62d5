import { STATUS_CODES } from 'node:http';
import { BadRequestException, HttpException, HttpStatus } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import {
  InvalidInputError,
  ModelNotFoundError,
  SessionNotFoundError,
  StoreMethodMissingError,
  StoreUnavailableError,
  type DropReason,
} from '../../contracts';

/** Failing fields of a 400: dotted path (`attachments.0.kind`) -> what is wrong with it. */
export type FieldErrors = Record<string, string[]>;

/** The one JSON shape of every error answer, HTTP and Socket.IO acks alike. */
export interface ErrorBody {
  statusCode: number;
  /** The status text, e.g. `Bad Request`. */
  error: string;
  message: string;
  /** Set on validation failures. */
  fields?: FieldErrors;
  /** Why the input was dropped, on the `429` / `503` answer of a dropped `?wait=true` input. */
  reason?: DropReason;
  /**
   * Seconds to wait before retrying, on Socket.IO acks of `429` / `503` (HTTP answers carry the
   * `Retry-After` header instead).
   */
  retryAfter?: number;
}

/** `Retry-After` of a `503` for an unavailable store: long enough for a reconnect. */
export const STORE_RETRY_AFTER_S = 5;
/** `Retry-After` of a `429` for a full waiting list: about one turn's progress. */
export const QUEUE_FULL_RETRY_AFTER_S = 2;

/** A body, query, parameter or socket payload failed validation (400, fields named). */
export class ValidationFailedException extends BadRequestException {
  constructor(readonly fields: FieldErrors) {
    super(`Validation failed: ${Object.keys(fields).join(', ') || 'body'}`);
  }
}

/**
 * `assignModel` failed for another reason than a missing session, an unknown model or an
 * unavailable store (422). A fixed sentence: the store's own text stays in the log.
 */
export class ModelRefusedException extends HttpException {
  constructor() {
    super(
      'The model could not be assigned: the session store refused the change',
      HttpStatus.UNPROCESSABLE_ENTITY,
    );
  }
}

/** No tool call of the session waits for approval under that id (here) (404). */
export class ApprovalNotFoundException extends HttpException {
  constructor(sessionId: string, callId: string) {
    super(
      `No tool call ${JSON.stringify(callId)} of session ${JSON.stringify(sessionId)} is waiting for approval`,
      HttpStatus.NOT_FOUND,
    );
  }
}

/**
 * A `?wait=true` input the agent dropped because it could not take it now: its session's
 * waiting list is full (429) or a store is unavailable (503). Both say when to retry.
 */
export class InputRefusedException extends HttpException {
  readonly retryAfterSeconds: number;

  constructor(readonly reason: Extract<DropReason, 'queue-full' | 'store-unavailable'>) {
    const full = reason === 'queue-full';
    super(
      full
        ? "The session's waiting list is full: retry later"
        : 'The input could not be stored: a store is unavailable, retry later',
      full ? HttpStatus.TOO_MANY_REQUESTS : HttpStatus.SERVICE_UNAVAILABLE,
    );
    this.retryAfterSeconds = full ? QUEUE_FULL_RETRY_AFTER_S : STORE_RETRY_AFTER_S;
  }
}

/** Flattens class-validator errors into dotted paths with their messages. */
export function fieldErrorsOf(errors: readonly ValidationError[], parent = ''): FieldErrors {
  const fields: FieldErrors = {};
  for (const error of errors) {
    const path = error.property
      ? parent
        ? `${parent}.${error.property}`
        : error.property
      : parent;
    const messages = Object.values(error.constraints ?? {});
    if (messages.length) {
      const key = path || 'body';
      fields[key] = [...(fields[key] ?? []), ...messages.map((m) => explain(m, key))];
    }
    Object.assign(fields, fieldErrorsOf(error.children ?? [], path));
  }
  return fields;
}

function explain(message: string, key: string): string {
  return message === 'an unknown value was passed to the validate function'
    ? `${key} must be a JSON object`
    : message;
}

/** An error body of that status (the status text filled in). */
export const bodyOf = (statusCode: number, message: string, fields?: FieldErrors): ErrorBody => ({
  statusCode,
  error: STATUS_CODES[statusCode] ?? 'Error',
  message,
  ...(fields ? { fields } : {}),
});

/** What an HttpException says, as one sentence. */
function messageOf(exception: HttpException): string {
  const response = exception.getResponse();
  if (typeof response === 'string') return response;
  const message = (response as { message?: unknown }).message;
  if (Array.isArray(message)) return message.map(String).join('; ');
  return typeof message === 'string' ? message : exception.message;
}

/** A client error raised by an HTTP library (body-parser's `http-errors`): safe to show. */
function clientErrorOf(exception: unknown): { status: number; message: string } | undefined {
  if (!exception || typeof exception !== 'object') return undefined;
  const e = exception as {
    status?: unknown;
    statusCode?: unknown;
    expose?: unknown;
    message?: unknown;
  };
  const status = typeof e.status === 'number' ? e.status : e.statusCode;
  if (typeof status !== 'number' || status < 400 || status > 499 || e.expose === false) {
    return undefined;
  }
  return { status, message: typeof e.message === 'string' ? e.message : STATUS_CODES[status]! };
}

/** Maps anything thrown while serving a request to its status and error body. */
export function toErrorBody(exception: unknown): ErrorBody {
  if (exception instanceof ValidationFailedException) {
    return bodyOf(400, exception.message, exception.fields);
  }
  if (exception instanceof InputRefusedException) {
    return { ...bodyOf(exception.getStatus(), exception.message), reason: exception.reason };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    if (status === 429) return bodyOf(429, 'Too many requests, slow down');
    return bodyOf(status, messageOf(exception));
  }
  if (exception instanceof InvalidInputError) {
    return bodyOf(400, exception.message, { [exception.field]: [exception.message] });
  }
  if (exception instanceof SessionNotFoundError) return bodyOf(404, exception.message);
  if (exception instanceof ModelNotFoundError) return bodyOf(422, exception.message);
  // Its message names the store in plain words; the driver's text is only in its cause.
  if (exception instanceof StoreUnavailableError) return bodyOf(503, exception.message);
  // A host's store without an optional method: the route exists, this server cannot serve it.
  if (exception instanceof StoreMethodMissingError) return bodyOf(501, exception.message);
  const client = clientErrorOf(exception);
  if (client) return bodyOf(client.status, client.message);
  return bodyOf(500, 'Internal server error');
}

/**
 * Seconds after which a refused request may be retried, for the `Retry-After` header (or the
 * `retryAfter` of a socket ack); `undefined` when retrying would not help. Rate limits set
 * their own header in the throttler guard.
 */
export function retryAfterOf(exception: unknown): number | undefined {
  if (exception instanceof InputRefusedException) return exception.retryAfterSeconds;
  if (exception instanceof StoreUnavailableError) return STORE_RETRY_AFTER_S;
  return undefined;
}
