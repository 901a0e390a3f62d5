/** A promise with its resolve function at hand; resolves at most once. */
export class Deferred<T> {
  readonly promise: Promise<T>;
  private resolveFn!: (value: T) => void;
  private done = false;

  constructor() {
    this.promise = new Promise<T>((resolve) => (this.resolveFn = resolve));
  }

  /** Whether `resolve` was called. */
  get settled(): boolean {
    return this.done;
  }

  /** Resolves once; later calls are ignored and return false. */
  resolve(value: T): boolean {
    if (this.done) return false;
    this.done = true;
    this.resolveFn(value);
    return true;
  }
}
