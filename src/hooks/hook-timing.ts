import { performance } from 'node:perf_hooks';
import type { HookMiddleware } from '../contracts';

/** One middleware call that took longer than the observer's threshold on its own. */
export interface SlowHookCall {
  hook: string;
  /** Who registered the middleware (`HookUseOptions.owner`), when given. */
  owner?: string;
  /** The hook's context (e.g. its `sessionId` and `turnId`). */
  ctx: unknown;
  /** When the call started, in milliseconds since the epoch. */
  startTime: number;
  /** The whole call, the rest of the chain (`next`) included. */
  durationMs: number;
  /** The call without the time spent in `next`: the middleware's own time. */
  selfMs: number;
}

/**
 * Watches middleware calls for slow ones (tracing reports them as spans). While `active()` says
 * no, the registry runs the plain chain: watching costs nothing until it is switched on.
 */
export interface HookObserver {
  /** Whether calls are timed now; asked once per hook run. */
  active(): boolean;
  /** A call whose own time (`selfMs`) reaches this is reported. */
  readonly thresholdMs: number;
  slow(call: SlowHookCall): void;
}

/**
 * Wraps a middleware so its own time is measured: the whole call minus the time its `next` took.
 * A call at or over the threshold is reported once it has settled (resolved or rejected).
 */
export function timedMiddleware(
  hook: string,
  owner: string | undefined,
  fn: HookMiddleware,
  observer: HookObserver,
): HookMiddleware {
  return (ctx, next) => {
    const start = performance.now();
    let inNext = 0;
    const timedNext = () => {
      const entered = performance.now();
      return next().finally(() => (inNext += performance.now() - entered));
    };
    const report = () => {
      const durationMs = performance.now() - start;
      const selfMs = durationMs - inNext;
      if (selfMs < observer.thresholdMs) return;
      const startTime = performance.timeOrigin + start;
      observer.slow({ hook, ...(owner ? { owner } : {}), ctx, startTime, durationMs, selfMs });
    };
    let result: Promise<void> | void;
    try {
      result = fn(ctx, timedNext);
    } catch (error) {
      report();
      throw error;
    }
    return Promise.resolve(result).finally(report);
  };
}
