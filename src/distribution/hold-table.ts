/**
 * Holds placed by clearing (S4, I11): per session, or on every session at once. Inputs wait for
 * their session to be free; a held session opens no turn. Holds nest: a session is free when
 * none covers it.
 */
export class HoldTable {
  private readonly perSession = new Map<string, number>();
  private global = 0;
  private waiters = new Set<() => void>();

  /** Holds the sessions (`undefined` = all); returns the release function (idempotent). */
  hold(sessionIds: readonly string[] | undefined): () => void {
    if (sessionIds === undefined) this.global++;
    else for (const id of sessionIds) this.perSession.set(id, (this.perSession.get(id) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (sessionIds === undefined) this.global--;
      else for (const id of sessionIds) this.releaseOne(id);
      this.wakeAll();
    };
  }

  /** Whether the session is held now. */
  isHeld(sessionId: string): boolean {
    return this.global > 0 || this.perSession.has(sessionId);
  }

  /**
   * Resolves once the session is not held (at once when it is free) or `signal` aborts. A free
   * session gets one shared settled promise: every input asks twice on its way in.
   */
  whenFree(sessionId: string, signal?: AbortSignal): Promise<void> {
    if (!this.isHeld(sessionId) || signal?.aborted) return FREE;
    return this.waitFree(sessionId, signal);
  }

  private async waitFree(sessionId: string, signal?: AbortSignal): Promise<void> {
    while (this.isHeld(sessionId) && !signal?.aborted) await this.nextRelease(signal);
  }

  private releaseOne(sessionId: string): void {
    const n = (this.perSession.get(sessionId) ?? 1) - 1;
    if (n > 0) this.perSession.set(sessionId, n);
    else this.perSession.delete(sessionId);
  }

  /** Resolves at the next release, or when `signal` aborts; leaves no listener behind. */
  private nextRelease(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        this.waiters.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      this.waiters.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }
}

const FREE: Promise<void> = Promise.resolve();
