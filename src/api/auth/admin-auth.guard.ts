import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { API_OPTIONS, type ResolvedApiOptions } from '../api.module-definition';
import type { HttpRequest, HttpResponse } from '../http/http-types';
import { RATE_BUCKETS, RateLimiter } from '../http/rate-limiter';
import { AdminTokenVerifier, bearerTokenOf } from './admin-token';
import type { AuthenticatedRequest } from './auth.decorators';

/**
 * The admin-token check of the module's routes: `Authorization: Bearer <admin token>`.
 * Sockets are authenticated once, at the handshake (see `SocketDoors`).
 *
 * Runs before the rate-limit guard. A wrong or missing token counts against the `auth` limit
 * of the address (401, then 429 once past it) and never against the `admin` one, and the
 * right token is never refused by the `auth` limit: someone guessing tokens from an address
 * cannot lock the operator out of it. Guessing itself is hopeless by the token's length
 * (at least 16 characters, 32 when generated); the `auth` limit keeps such traffic cheap.
 */
@Injectable()
export class AdminAuthGuard implements CanActivate {
  constructor(
    private readonly tokens: AdminTokenVerifier,
    private readonly limiter: RateLimiter,
    @Inject(API_OPTIONS) private readonly options: ResolvedApiOptions,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const request = context.switchToHttp().getRequest<HttpRequest & AuthenticatedRequest>();
    const caller = this.tokens.verify(bearerTokenOf(request.headers.authorization));
    if (caller) {
      request.caller = caller;
      return true;
    }
    const response = context.switchToHttp().getResponse<HttpResponse>();
    const address = request.ip ?? request.socket.remoteAddress;
    const verdict = await this.limiter.hit(
      RATE_BUCKETS.auth,
      address,
      this.options.rateLimits.auth,
    );
    if (verdict.blocked) {
      response.setHeader('Retry-After', verdict.retryAfterSeconds);
      throw new HttpException('Too many requests, slow down', HttpStatus.TOO_MANY_REQUESTS);
    }
    response.setHeader('WWW-Authenticate', 'Bearer realm="agent"');
    throw new UnauthorizedException('A valid admin bearer token is required');
  }
}
