import type { HttpRequest, HttpResponse, Middleware, NextFn } from '../api';

/** How long a turn of the event loop may take while requests wait, in milliseconds. */
export const TURN_TARGET_MS = 5;
/** Most requests started in one turn of the event loop. */
export const MAX_PER_TURN = 16;

/** Pacing options (the defaults suit a server; tests pass a clock). */
export interface PacingOptions {
  targetMs?: number;
  maxPerTurn?: number;
  now?: () => number;
}

/**
 * Starts requests in chunks, one chunk per turn of the event loop, while others wait in arrival
 * order. Without it a burst (a hundred posts read in one poll) is worked through in one stretch
 * of a hundred milliseconds and more, during which nothing else, a `/health` probe or another
 * session's stream, gets the loop. An immediate scheduled from a check phase runs in the next
 * turn, after the poll phase, so I/O is served between the chunks.
 *
 * The chunk adapts to what a request costs on this machine: it halves when a turn took longer
 * than `targetMs` and grows by one when a turn took less than half of it (1 to `maxPerTurn`).
 * Requests for `bypass` paths (`/health`) are never held back. A request whose client went
 * away while it waited is skipped. A quiet server starts every request at once.
 */
export function pacedRequests(bypass: readonly string[], options: PacingOptions = {}): Middleware {
  const targetMs = options.targetMs ?? TURN_TARGET_MS;
  const maxPerTurn = options.maxPerTurn ?? MAX_PER_TURN;
  const now = options.now ?? (() => performance.now());
  const waiting: { req: HttpRequest; next: NextFn }[] = [];
  let perTurn = maxPerTurn;
  let startedThisTurn = 0;
  let pumping = false;
  let lastTurn = 0;

  const adapt = () => {
    const at = now();
    const lap = at - lastTurn;
    lastTurn = at;
    if (lap > targetMs) perTurn = Math.max(1, Math.floor(perTurn / 2));
    else if (lap < targetMs / 2) perTurn = Math.min(maxPerTurn, perTurn + 1);
  };
  const pump = () => {
    adapt();
    startedThisTurn = 0;
    while (waiting.length && startedThisTurn < perTurn) {
      const { req, next } = waiting.shift()!;
      if (req.destroyed) continue;
      startedThisTurn++;
      next();
    }
    pumping = waiting.length > 0;
    if (pumping) setImmediate(pump);
  };
  return (req: HttpRequest, _res: HttpResponse, next: NextFn) => {
    if (bypass.includes(req.path)) return next();
    if (!pumping && startedThisTurn < perTurn) {
      // Nothing waits: start now, counted against this turn.
      if (startedThisTurn++ === 0) {
        lastTurn = now();
        setImmediate(() => (startedThisTurn = 0));
      }
      return next();
    }
    waiting.push({ req, next });
    if (!pumping) {
      pumping = true;
      setImmediate(pump);
    }
  };
}
