import { Injectable, type ExecutionContext } from '@nestjs/common';
import { ThrottlerGuard, type ThrottlerLimitDetail } from '@nestjs/throttler';
import type { HttpResponse } from './http-types';

/**
 * `@nestjs/throttler`'s guard for HTTP only (it is global, and gateway handlers would otherwise
 * run through it too), answering a refusal with the standard `Retry-After` header besides the
 * throttler's own per-name ones.
 */
@Injectable()
export class ApiThrottlerGuard extends ThrottlerGuard {
  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    return context.getType() !== 'http';
  }

  protected override async throwThrottlingException(
    context: ExecutionContext,
    detail: ThrottlerLimitDetail,
  ): Promise<void> {
    const seconds = Math.max(1, Math.ceil(detail.timeToBlockExpire));
    context.switchToHttp().getResponse<HttpResponse>().setHeader('Retry-After', seconds);
    return super.throwThrottlingException(context, detail);
  }
}
