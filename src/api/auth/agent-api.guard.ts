import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

/** Injection token of the guard that authenticates the module's callers. */
export const API_AUTH_GUARD = Symbol.for('agent-api:auth_guard');

/**
 * The guard on the module's own controllers: the admin-token check (`AdminAuthGuard`) or the
 * host's `authGuard`, whichever the module was given. Nothing outside the module's routes is
 * guarded by it.
 */
@Injectable()
export class AgentApiGuard implements CanActivate {
  constructor(@Inject(API_AUTH_GUARD) private readonly guard: CanActivate) {}

  canActivate(context: ExecutionContext): ReturnType<CanActivate['canActivate']> {
    if (context.getType() !== 'http') return true;
    return this.guard.canActivate(context);
  }
}
