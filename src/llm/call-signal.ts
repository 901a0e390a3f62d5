/**
 * The signal of one model call attempt: aborted by the caller's signal, or by this attempt's
 * idle timer when a started stream goes silent too long.
 */
export class CallSignal {
  /** Pass this to the SDK. */
  readonly signal: AbortSignal;
  private readonly idle = new AbortController();
  private timer?: ReturnType<typeof setTimeout>;
  private stalled = false;

  constructor(
    caller: AbortSignal,
    /** Longest silence allowed between chunks, in milliseconds. */
    readonly idleTimeoutMs: number,
  ) {
    this.signal = AbortSignal.any([caller, this.idle.signal]);
  }

  /** Whether the idle timer fired (then the SDK saw an abort the caller did not ask for). */
  get timedOut(): boolean {
    return this.stalled;
  }

  /** (Re)starts the idle timer: call on every chunk. A timeout of 0 or less disables it. */
  touch(): void {
    if (this.idleTimeoutMs <= 0 || !Number.isFinite(this.idleTimeoutMs)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.stalled = true;
      this.idle.abort();
    }, this.idleTimeoutMs);
    this.timer.unref?.();
  }

  /** Stops the idle timer. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
