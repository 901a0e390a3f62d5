/** Longest wait for one health probe (a store query, a provider ping). */
export const HEALTH_PROBE_TIMEOUT_MS = 1500;

/** A probe that did not answer in time. */
export class ProbeTimeoutError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms / 1000} s`);
    this.name = 'ProbeTimeoutError';
  }
}

/**
 * Waits for `work` at most `ms`, then rejects with `ProbeTimeoutError`: a hung store or
 * provider makes `/health` report it down in time rather than never answer (probes and load
 * balancers give up after a few seconds and would read "no answer" as the process gone).
 * `work` runs on; its late result or rejection is ignored.
 */
export function withTimeout<T>(work: Promise<T>, ms = HEALTH_PROBE_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProbeTimeoutError(ms)), ms);
  });
  work.catch(() => undefined);
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * One probe in flight at a time: while one has not settled, later checks share it instead of
 * starting another, so that `/health` polled against a hung store does not pile up queries.
 */
export class SingleFlight<T> {
  private running?: Promise<T>;

  /** The running probe, or a new one from `start`. */
  run(start: () => Promise<T>): Promise<T> {
    if (this.running) return this.running;
    const running = start().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }
}
