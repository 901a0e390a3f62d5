import {
  Injectable,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { HttpRequest, HttpResponse } from '../http/http-types';
import { AdminTokenVerifier, bearerTokenOf } from './admin-token';
import { IS_PUBLIC, type AuthenticatedRequest } from './auth.decorators';

/**
 * Secure by default: every HTTP route needs `Authorization: Bearer <admin token>` unless it is
 * marked `@Public()`. Sockets are authenticated once, at the handshake (see the gateway).
 */
@Injectable()
export class AdminAuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly tokens: AdminTokenVerifier,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return true;
    const isPublic = this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (isPublic) return true;
    const request = context.switchToHttp().getRequest<HttpRequest & AuthenticatedRequest>();
    const caller = this.tokens.verify(bearerTokenOf(request.headers.authorization));
    if (!caller) {
      context
        .switchToHttp()
        .getResponse<HttpResponse>()
        .setHeader('WWW-Authenticate', 'Bearer realm="agent"');
      throw new UnauthorizedException('A valid admin bearer token is required');
    }
    request.caller = caller;
    return true;
  }
}
