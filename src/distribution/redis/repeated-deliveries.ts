import type { IncomingMessage, Settlement } from '../../contracts';
import type { SettlementSource } from './settlement-waiters';

/** What following repeated deliveries needs. */
export interface RepeatedDeliveriesParts {
  /** The inbox, where the first delivery's settlement is recorded by whoever ran it. */
  inbox: SettlementSource;
  /** Wakes a session (one deduplicated wake job), so a takeover enters inputs nobody carries. */
  wake: (sessionId: string) => Promise<void>;
  /** How often the inbox is read while the first delivery has not settled (ms). */
  pollMs: number;
  /** After this long without a settlement the session is woken once (ms): a lease. */
  wakeAfterMs: number;
}

/** The settlement of a repeat still waiting when the instance shuts down (S9). */
const SHUTDOWN: Settlement = { settled: 'dropped', reason: 'shutdown' };

/**
 * Repeated deliveries of inputs accepted before on some instance and not settled yet
 * (`WorkDispatcher.repeat`). The first delivery is on its way wherever it was accepted, and its
 * settlement goes to that instance's caller and into the inbox; a repeat must neither run the
 * input again nor pass `agent:input:before` again, so it waits for that settlement in the inbox.
 * If none comes within a lease, the instance that accepted the first delivery may have died
 * before handing it over: the session is woken once, and the takeover that follows enters the
 * unsettled inputs older than a lease, this one among them.
 */
export class RepeatedDeliveries {
  private closed = false;
  private readonly sleeping = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();

  constructor(private readonly parts: RepeatedDeliveriesParts) {}

  /** Resolves with the first delivery's settlement (`dropped` / `shutdown` if closed first). */
  async follow(message: IncomingMessage & { id: string }): Promise<Settlement> {
    const started = Date.now();
    let woken = false;
    while (!this.closed) {
      const entry = await this.parts.inbox.get(message.id).catch(() => undefined);
      if (entry?.settlement) return entry.settlement;
      if (!woken && Date.now() - started >= this.parts.wakeAfterMs) {
        woken = true;
        await this.parts.wake(message.sessionId).catch(() => undefined);
      }
      await this.sleep(this.parts.pollMs);
    }
    return SHUTDOWN;
  }

  /** Stops following: the repeats still waiting resolve as dropped (`shutdown`). */
  close(): void {
    this.closed = true;
    for (const sleeper of this.sleeping) {
      clearTimeout(sleeper.timer);
      sleeper.wake();
    }
    this.sleeping.clear();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const sleeper = {
        wake: resolve,
        timer: setTimeout(() => {
          this.sleeping.delete(sleeper);
          resolve();
        }, ms),
      };
      this.sleeping.add(sleeper);
    });
  }
}
