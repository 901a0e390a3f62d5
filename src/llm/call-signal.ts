/**
 * Deadlines and abort wiring of one model call.
 *
 * Memory: each attempt owns a plain `AbortController`, linked to the caller's signal by one
 * listener that {@link CallSignal.end} removes. The SDKs add abort listeners to the signal they
 * are given and never remove them; a composed `AbortSignal.any([caller, idle])` with such
 * listeners is kept alive by Node for as long as the caller's signal lives, and with it
 * everything the listeners reach (about 2 kB per call). A private controller is garbage once
 * its attempt ends, listeners and all.
 */

/** Whether `ms` is a usable timeout (0, negative or non-finite disables it). */
export function isTimeout(ms: number): boolean {
  return ms > 0 && Number.isFinite(ms);
}

/** Milliseconds since an arbitrary origin, never going backwards. */
const now = (): number => performance.now();

/**
 * The time all attempts of one streamed call may spend before their first token: twice the
 * idle timeout, retries and their waits included, so a silent endpoint fails within about
 * 2 × idle however many retries are allowed. Unlimited once a token came, or when the idle
 * timeout is disabled.
 */
export class CallBudget {
  /** Attempts started so far. */
  attempts = 0;
  private readonly started = now();
  private readonly deadline: number;
  private answering = false;

  constructor(
    /** Longest silence allowed, in milliseconds, before the first byte and between chunks. */
    readonly idleTimeoutMs: number,
  ) {
    this.deadline = isTimeout(idleTimeoutMs) ? this.started + 2 * idleTimeoutMs : Infinity;
  }

  /** Whether a token was yielded: the budget no longer applies, and silence is mid-answer. */
  get hasAnswered(): boolean {
    return this.answering;
  }

  /** Milliseconds since the call started. */
  get elapsedMs(): number {
    return now() - this.started;
  }

  /** Milliseconds left before the first token is due (`Infinity` once it came). */
  remainingMs(at = now()): number {
    return this.answering ? Infinity : this.deadline - at;
  }

  /** Records that the first token was yielded. */
  answered(): void {
    this.answering = true;
  }
}

/** Why an attempt was given up by its own timer. */
export type StallReason = 'idle' | 'budget';

/** What a stalled attempt tells about its silence (for the diagnostic). */
export interface Silence {
  reason: StallReason;
  /** The idle timeout, in milliseconds. */
  idleTimeoutMs: number;
  /** Whether a token had been yielded (the silence broke an answer off). */
  midAnswer: boolean;
  /** Attempts made, this one included. */
  attempts: number;
  /** Milliseconds since the call started. */
  elapsedMs: number;
}

/**
 * The signal of one attempt of a model call: aborted when the caller's signal aborts, when the
 * endpoint stays silent longer than the idle timeout (before the response headers, or between
 * chunks), or when the call's {@link CallBudget} runs out before the first token.
 *
 * Call {@link touch} on every sign of life and {@link end} when the attempt is over, however it
 * ends: it clears the timer and unlinks the caller's signal, so nothing of the attempt outlives
 * it.
 */
export class CallSignal {
  /** The attempt's controller: pass its signal to the SDK (and the controller to its streams). */
  readonly controller = new AbortController();
  private timer?: ReturnType<typeof setTimeout>;
  private lastActivity = now();
  private stall?: Silence;
  private ended = false;
  private paused = false;
  /** Kept as a field so that the very listener added can be removed again. */
  private readonly onCallerAbort = (): void => this.controller.abort(this.caller.reason);
  private readonly onTimer = (): void => this.check();

  constructor(
    private readonly caller: AbortSignal,
    private readonly budget: CallBudget,
  ) {
    budget.attempts++;
    if (caller.aborted) this.controller.abort(caller.reason);
    else caller.addEventListener('abort', this.onCallerAbort, { once: true });
    this.arm();
  }

  /** Pass this to the SDK. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The idle timeout of this attempt, in milliseconds. */
  get idleTimeoutMs(): number {
    return this.budget.idleTimeoutMs;
  }

  /** Set when the attempt's own timer aborted it (then the SDK saw an abort nobody asked for). */
  get stalled(): Silence | undefined {
    return this.stall;
  }

  /** A sign of life (response headers, a chunk): the silence starts again from now. */
  touch(): void {
    this.lastActivity = now();
  }

  /**
   * The consumer has a chunk: the time it takes (the agent's hooks, a slow socket) is not the
   * endpoint's silence, so the timer waits until {@link resume}.
   */
  pause(): void {
    this.paused = true;
  }

  /** The consumer asks for more: the silence starts from now. */
  resume(): void {
    this.paused = false;
    this.touch();
    if (!this.timer && !this.ended) this.arm();
  }

  /**
   * Ends the attempt: stops the timer and unlinks the caller's signal. An attempt that did not
   * complete is aborted, which releases its connection.
   */
  end(completed: boolean): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.caller.removeEventListener('abort', this.onCallerAbort);
    if (!completed && !this.controller.signal.aborted) this.controller.abort();
  }

  /** Milliseconds of silence left: the idle window from the last activity, within the budget. */
  private leftMs(at: number): { left: number; reason: StallReason } {
    const idle = isTimeout(this.idleTimeoutMs)
      ? this.lastActivity + this.idleTimeoutMs - at
      : Infinity;
    const budget = this.budget.remainingMs(at);
    return budget < idle ? { left: budget, reason: 'budget' } : { left: idle, reason: 'idle' };
  }

  /**
   * One timer per attempt, re-armed lazily when it fires early (a chunk came meanwhile), so a
   * chunk costs a clock read rather than a timer.
   */
  private arm(): void {
    const { left } = this.leftMs(now());
    if (!Number.isFinite(left)) return;
    this.timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(left)));
    this.timer.unref?.();
  }

  private check(): void {
    this.timer = undefined;
    // Paused: resume() arms the timer again.
    if (this.ended || this.paused || this.controller.signal.aborted) return;
    const { left, reason } = this.leftMs(now());
    if (left > 0) return this.arm();
    this.stall = {
      reason,
      idleTimeoutMs: this.idleTimeoutMs,
      midAnswer: this.budget.hasAnswered,
      attempts: this.budget.attempts,
      elapsedMs: this.budget.elapsedMs,
    };
    this.controller.abort();
  }
}
