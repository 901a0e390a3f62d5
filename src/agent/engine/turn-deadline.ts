/**
 * A turn's deadline (`turnTimeoutMs`) that can be paused: the time a tool call waits for a
 * person's approval does not count (README, "Human approval before a tool runs"). Pauses nest
 * (parallel calls may wait at once); the clock runs again when the last one resumes, with the
 * time that was left.
 */
export class TurnDeadline {
  private timer?: NodeJS.Timeout;
  private remaining: number;
  private startedAt = 0;
  private pauses = 0;
  private done = false;

  constructor(
    limitMs: number,
    private readonly expire: () => void,
  ) {
    this.remaining = limitMs;
    this.run();
  }

  /** Stops the clock until the function it returns is called (once; later calls do nothing). */
  pause(): () => void {
    if (this.pauses++ === 0 && this.timer && !this.done) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.remaining -= performance.now() - this.startedAt;
    }
    let resumed = false;
    return () => {
      if (resumed) return;
      resumed = true;
      if (--this.pauses === 0) this.run();
    };
  }

  /** The turn ended: the deadline will not fire. */
  clear(): void {
    this.done = true;
    clearTimeout(this.timer);
  }

  private run(): void {
    if (this.done) return;
    this.startedAt = performance.now();
    this.timer = setTimeout(
      () => {
        this.done = true;
        this.expire();
      },
      Math.max(0, this.remaining),
    );
    this.timer.unref?.();
  }
}
