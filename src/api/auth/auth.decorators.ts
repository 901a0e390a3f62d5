import { createParamDecorator, SetMetadata, type ExecutionContext } from '@nestjs/common';
import type { Actor } from '../../contracts';

/** Metadata key marking a route that needs no admin token. */
export const IS_PUBLIC = 'api:is_public';

/** Marks a controller or route as public (no admin token). Everything else needs it. */
export const Public = () => SetMetadata(IS_PUBLIC, true);

/** An HTTP request after authentication. */
export interface AuthenticatedRequest {
  caller?: Actor;
}

/** The authenticated caller of the request (set by `AdminAuthGuard`). */
export const Caller = createParamDecorator(
  (_: unknown, context: ExecutionContext): Actor | undefined =>
    context.switchToHttp().getRequest<AuthenticatedRequest>().caller,
);
