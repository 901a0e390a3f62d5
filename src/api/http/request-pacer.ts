import type { HttpRequest, HttpResponse, Middleware, NextFn } from './http-types';

/** Requests started per turn of the event loop while others wait. */
export const REQUESTS_PER_TICK = 8;

/**
 * Starts at most `perTick` requests per turn of the event loop; the others wait, in arrival
 * order, for the next turns. Without it a burst (a hundred posts read in one poll) is worked
 * through in one stretch of a hundred milliseconds and more, during which nothing else, a
 * `/health` probe or another session's stream, gets the loop. An immediate scheduled from a
 * check phase runs in the next turn, after the poll phase, so I/O is served between the chunks.
 * Requests for `bypass` paths (`/health`) are never held back. A request that is gone before
 * its start (the client closed it) is skipped.
 */
export function pacedRequests(bypass: readonly string[], perTick = REQUESTS_PER_TICK): Middleware {
  const waiting: { req: HttpRequest; next: NextFn }[] = [];
  let startedThisTick = 0;
  let pumping = false;
  const pump = () => {
    startedThisTick = 0;
    while (waiting.length && startedThisTick < perTick) {
      const { req, next } = waiting.shift()!;
      if (req.destroyed) continue;
      startedThisTick++;
      next();
    }
    pumping = waiting.length > 0;
    if (pumping) setImmediate(pump);
  };
  return (req: HttpRequest, _res: HttpResponse, next: NextFn) => {
    if (bypass.includes(req.path)) return next();
    if (!pumping && startedThisTick < perTick) {
      // A quiet server: start now, and count it against this turn.
      if (startedThisTick++ === 0) setImmediate(() => (startedThisTick = 0));
      return next();
    }
    waiting.push({ req, next });
    if (!pumping) {
      pumping = true;
      setImmediate(pump);
    }
  };
}
