import { MailboxRequestError, MailboxTimeoutError } from './mailbox-errors';
import type { Answer } from './mailbox-wire';

/** A request waiting for its answer. */
interface Waiting {
  resolve(value: unknown): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
  to: string;
  type: string;
}

/**
 * The requests of one mailbox that wait for their answer, by correlation id. Each settles
 * once: by its answer, a failure to send, its timeout, or `rejectAll` (close).
 */
export class PendingRequests {
  private readonly waiting = new Map<string, Waiting>();

  /** How many requests wait. */
  get size(): number {
    return this.waiting.size;
  }

  /** Registers a request; its promise rejects with `MailboxTimeoutError` after `timeoutMs`. */
  add<R>(correlationId: string, to: string, type: string, timeoutMs: number): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(correlationId);
        reject(new MailboxTimeoutError(to, type, timeoutMs));
      }, timeoutMs);
      this.waiting.set(correlationId, { resolve, reject, timer, to, type });
    });
  }

  /** Settles a request with its answer; an unknown id (late answer, not ours) is ignored. */
  settle(correlationId: string, body: unknown): void {
    const waiting = this.take(correlationId);
    if (!waiting) return;
    const answer = body as Answer | undefined;
    if (answer?.ok === true) return waiting.resolve(answer.value);
    const error = answer?.ok === false ? answer.error : 'Malformed answer';
    waiting.reject(new MailboxRequestError(error, waiting.type, waiting.to));
  }

  /** Rejects one request with `error` (its message could not be sent). */
  fail(correlationId: string, error: Error): void {
    this.take(correlationId)?.reject(error);
  }

  /** Rejects every waiting request with the error `make` builds for it. */
  rejectAll(make: (to: string, type: string) => Error): void {
    for (const correlationId of [...this.waiting.keys()]) {
      const waiting = this.take(correlationId);
      waiting?.reject(make(waiting.to, waiting.type));
    }
  }

  private take(correlationId: string): Waiting | undefined {
    const waiting = this.waiting.get(correlationId);
    if (!waiting) return undefined;
    this.waiting.delete(correlationId);
    clearTimeout(waiting.timer);
    return waiting;
  }
}
