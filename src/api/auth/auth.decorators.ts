import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { Actor } from '../../contracts';

/** An HTTP request (or Socket.IO handshake request) after authentication. */
export interface AuthenticatedRequest {
  /** Set by the admin-token check, or by a host guard that knows the caller. */
  caller?: Actor;
  /** What a host guard (Passport and most others) leaves: the user it authenticated. */
  user?: unknown;
}

/** The platform of callers taken from a host guard's `request.user`. */
export const HOST_PLATFORM = 'host';

/**
 * The caller a request was authenticated as: `request.caller`, else one taken from a host
 * guard's `request.user` (its `id`, `sub`, `userId` or `username`), else `undefined`.
 */
export function callerOf(request: AuthenticatedRequest | undefined): Actor | undefined {
  if (!request) return undefined;
  const { caller, user } = request;
  if (caller && typeof caller.userId === 'string' && typeof caller.platform === 'string') {
    return caller;
  }
  if (!user || typeof user !== 'object') return undefined;
  const fields = user as Record<string, unknown>;
  for (const key of ['id', 'sub', 'userId', 'username']) {
    const value = fields[key];
    if (typeof value === 'string' || typeof value === 'number') {
      return { platform: HOST_PLATFORM, userId: String(value) };
    }
  }
  return undefined;
}

/** The authenticated caller of the request (see {@link callerOf}). */
export const Caller = createParamDecorator(
  (_: unknown, context: ExecutionContext): Actor | undefined =>
    callerOf(context.switchToHttp().getRequest<AuthenticatedRequest>()),
);
