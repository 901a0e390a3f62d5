import {
  Injectable,
  ValidationPipe,
  type ArgumentMetadata,
  type PipeTransform,
  type Type,
  type ValidationPipeOptions,
} from '@nestjs/common';
import { ValidateBy, buildMessage, type ValidationOptions } from 'class-validator';
import { ValidationFailedException, fieldErrorsOf, toErrorBody, type ErrorBody } from './api-error';

/** Longest session id, turn id, provider or model name accepted. */
export const MAX_ID_LENGTH = 256;

/** A whole number from a query string (`'20'` -> 20); anything else is left for validation. */
export const toInteger = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;

/**
 * Whether a string holds a control character: C0 (below 0x20: `\n`, ESC, NUL, ...), DEL or C1
 * (0x7F-0x9F). Ids and names travel into logs, terminals, file and room names and other
 * systems, where such characters forge lines or act as commands; no real id needs them.
 */
export function hasControlChars(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  }
  return false;
}

/** class-validator: a string without control characters (see {@link hasControlChars}). */
export const NoControlChars = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'noControlChars',
      validator: {
        validate: (value: unknown) => typeof value !== 'string' || !hasControlChars(value),
        defaultMessage: buildMessage(
          (each) => `${each}$property must not contain control characters`,
          options,
        ),
      },
    },
    options,
  );

/**
 * One validation policy for bodies, queries and socket payloads: whitelist, unknown fields
 * refused, values transformed into the DTO classes without implicit type conversion, and the
 * failing fields named in the 400.
 */
export const VALIDATION_OPTIONS: ValidationPipeOptions = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
  // One message per failing field: the first constraint it breaks.
  stopAtFirstError: true,
  transform: true,
  transformOptions: { enableImplicitConversion: false },
  validationError: { target: false, value: false },
  exceptionFactory: (errors) => new ValidationFailedException(fieldErrorsOf(errors)),
};

/** Deepest nesting of objects and arrays accepted in a body or payload. */
export const MAX_DEPTH = 32;
/** Most objects, arrays and values in one body or payload (real ones have a few dozen). */
export const MAX_NODES = 10_000;

/** Keys refused anywhere in a body: they would reach prototypes rather than data. */
const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * What is wrong with the shape of a parsed body, if anything: too deep, too many values, or a
 * reserved key (which class-transformer would drop silently rather than refuse). Iterative,
 * so that a hostile body cannot overflow the stack here; checked before class-transformer and
 * class-validator, which recurse.
 */
export function shapeProblem(value: unknown): { field?: string; message: string } | undefined {
  const stack: [unknown, number, string][] = [[value, 0, '']];
  let nodes = 0;
  while (stack.length) {
    const [current, depth, path] = stack.pop()!;
    if (++nodes > MAX_NODES) return { message: `the body holds more than ${MAX_NODES} values` };
    if (current === null || typeof current !== 'object') continue;
    if (depth >= MAX_DEPTH) return { message: `the body nests deeper than ${MAX_DEPTH} levels` };
    for (const key of Object.keys(current)) {
      const field = path ? `${path}.${key}` : key;
      if (RESERVED_KEYS.has(key)) return { field, message: `property ${key} should not exist` };
      stack.push([(current as Record<string, unknown>)[key], depth + 1, field]);
    }
  }
  return undefined;
}

/** `ValidationPipe` that first refuses bodies it could not transform safely. */
class ApiValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const problem = shapeProblem(value);
    if (problem) {
      const field = problem.field ?? metadata.data ?? metadata.type;
      throw new ValidationFailedException({ [field]: [problem.message] });
    }
    return super.transform(value, metadata);
  }
}

/** The global validation pipe (`APP_PIPE`). */
export function createValidationPipe(): ValidationPipe {
  return new ApiValidationPipe(VALIDATION_OPTIONS);
}

const payloadPipe = createValidationPipe();

/** Validates a socket payload like an HTTP body: the DTO instance, or the 400 error body. */
export async function validatePayload<T extends object>(
  dto: Type<T>,
  payload: unknown,
): Promise<{ value: T } | { error: ErrorBody }> {
  try {
    const value = (await payloadPipe.transform(payload, { type: 'body', metatype: dto })) as T;
    return { value };
  } catch (error) {
    return { error: toErrorBody(error) };
  }
}

/**
 * Whether a session id is acceptable: a non-blank string of at most `MAX_ID_LENGTH`, without
 * control characters.
 */
export function isSessionId(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length <= MAX_ID_LENGTH &&
    /\S/.test(value) &&
    !hasControlChars(value)
  );
}

/** A path parameter that is an identifier (`isSessionId`'s rules); 400 naming it otherwise. */
function identifierParam(name: string, value: unknown): string {
  if (isSessionId(value)) return value;
  const problem =
    typeof value === 'string' && hasControlChars(value)
      ? `${name} must not contain control characters`
      : `${name} must be a non-blank string of at most ${MAX_ID_LENGTH} characters`;
  throw new ValidationFailedException({ [name]: [problem] });
}

/** Validates the `:sessionId` path parameter (400 naming `sessionId`). */
@Injectable()
export class SessionIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    return identifierParam('sessionId', value);
  }
}

/** Validates the `:callId` path parameter (400 naming `callId`). */
@Injectable()
export class CallIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    return identifierParam('callId', value);
  }
}
