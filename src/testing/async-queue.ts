/**
 * A first-in first-out queue whose `take` waits for the next value: what a test awaits
 * ("the next request", "the next disconnect") without polling or sleeping.
 * @internal
 */
export class AsyncQueue<T> {
  private readonly values: T[] = [];
  private readonly waiters: Array<(value: T) => void> = [];

  /** Hands `value` to the oldest waiting `take`, or keeps it for the next one. */
  push(value: T): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(value);
    else this.values.push(value);
  }

  /** The oldest value not yet taken, waiting for one when there is none. */
  take(): Promise<T> {
    if (this.values.length) return Promise.resolve(this.values.shift() as T);
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
