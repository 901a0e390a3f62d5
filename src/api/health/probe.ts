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

/** How long a model provider's ping result stands before `/health` pings it again. */
export const MODEL_PING_TTL_MS = 10_000;

/**
 * A probe whose last result stands for `ttlMs`: the model provider is pinged at most once per
 * `ttlMs` however often `/health` is polled (each ping is a request to a paid, rate-limited
 * API, and a poll should not wait on it). Once the result is older, the next check starts a
 * fresh ping and answers with the last result meanwhile (stale while it revalidates); only
 * the very first check waits for its ping. A failure is a result too, and stands as long.
 */
export class CachedProbe {
  private last?: { ok: true } | { ok: false; error: Error };
  private at = 0;
  private readonly flight = new SingleFlight<void>();

  constructor(
    private readonly ttlMs = MODEL_PING_TTL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Resolves (up) or rejects (down) with the standing result; `start` pings. */
  run(start: () => Promise<void>): Promise<void> {
    const fresh = this.last && this.now() - this.at < this.ttlMs;
    if (!fresh) {
      const ping = this.flight.run(() =>
        start().then(
          () => this.record({ ok: true }),
          (error: unknown) =>
            this.record({
              ok: false,
              error: error instanceof Error ? error : new Error(String(error)),
            }),
        ),
      );
      if (!this.last) return ping.then(() => this.standing());
    }
    return this.standing();
  }

  private record(result: NonNullable<CachedProbe['last']>): void {
    this.last = result;
    this.at = this.now();
  }

  private standing(): Promise<void> {
    const last = this.last!;
    return last.ok ? Promise.resolve() : Promise.reject(last.error);
  }
}
