import type { Settlement } from '../../contracts';

/**
 * The inbox as distribution uses it: where a settlement is looked up when its message did not
 * come, and where the holder makes sure a settlement is recorded before it lets a session go.
 */
export interface SettlementSource {
  get(id: string): Promise<{ settlement?: Settlement } | undefined>;
  /** Records the settlement of inputs not settled yet (the first settlement stays). */
  settle(ids: readonly string[], settlement: Settlement): Promise<void>;
}

/**
 * The inputs this instance handed over and whose callers wait here, by id. A settlement comes
 * through the mailbox from the instance that ran the input; one that waited longer than a lease
 * is also looked up in the inbox, for an input whose session was taken over from a dead
 * instance (whose new holder did not know where its caller waits).
 */
export class SettlementWaiters {
  private readonly waiters = new Map<string, { resolve: (s: Settlement) => void; since: number }>();

  /** A promise of the input's settlement. */
  wait(id: string): Promise<Settlement> {
    return new Promise<Settlement>((resolve) =>
      this.waiters.set(id, { resolve, since: Date.now() }),
    );
  }

  /** Resolves the waiter of the input, if any (once). */
  settle(id: string, settlement: Settlement): void {
    const waiter = this.waiters.get(id);
    this.waiters.delete(id);
    waiter?.resolve(settlement);
  }

  /** Stops waiting for the input (it never went on its way). */
  forget(id: string): void {
    this.waiters.delete(id);
  }

  /** Looks up, in `source`, the settlements of the inputs waited for longer than `olderThanMs`. */
  async checkOld(source: SettlementSource, olderThanMs: number): Promise<void> {
    const oldest = Date.now() - olderThanMs;
    for (const [id, waiter] of [...this.waiters]) {
      if (waiter.since > oldest) continue;
      const entry = await source.get(id).catch(() => undefined);
      if (entry?.settlement) this.settle(id, entry.settlement);
    }
  }
}
