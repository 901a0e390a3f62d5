import { Deferred } from './deferred';

/**
 * Holds placed by `clearing` (S4, I11): per session, or on every session at once. Inputs wait at
 * the gate while their session is held. Holds nest: a session is free when none covers it.
 */
export class HoldTable {
  private readonly perSession = new Map<string, number>();
  private global = 0;
  private waiters: Deferred<void>[] = [];

  /** Holds the sessions (`undefined` = all); returns the release function (idempotent). */
  hold(sessionIds: readonly string[] | undefined): () => void {
    if (sessionIds === undefined) this.global++;
    else for (const id of sessionIds) this.perSession.set(id, (this.perSession.get(id) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (sessionIds === undefined) this.global--;
      else {
        for (const id of sessionIds) {
          const n = (this.perSession.get(id) ?? 1) - 1;
          if (n > 0) this.perSession.set(id, n);
          else this.perSession.delete(id);
        }
      }
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w.resolve();
    };
  }

  /** Whether the session is held now. */
  isHeld(sessionId: string): boolean {
    return this.global > 0 || this.perSession.has(sessionId);
  }

  /** Whether any hold exists. */
  get any(): boolean {
    return this.global > 0 || this.perSession.size > 0;
  }

  /** Resolves once the session is not held (at once when it is free). */
  async whenFree(sessionId: string, cancelled?: () => boolean): Promise<void> {
    while (this.isHeld(sessionId) && !cancelled?.()) {
      const waiter = new Deferred<void>();
      this.waiters.push(waiter);
      await waiter.promise;
    }
  }

  /** Wakes every waiter (used at shutdown so waiting inputs can be dropped). */
  wakeAll(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }
}
