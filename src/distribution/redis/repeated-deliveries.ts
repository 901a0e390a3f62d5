import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IncomingMessage, Settlement } from '../../contracts';
import type { SettlementSource } from './settlement-waiters';

/** What following repeated deliveries needs. */
export interface RepeatedDeliveriesParts {
  /** The inbox, where the first delivery's settlement is recorded by whoever ran it. */
  inbox: SettlementSource;
  /**
   * Wakes a session for a takeover (its clean-release mark forgotten, one deduplicated wake
   * job), so that the next grant enters the inputs nobody carries.
   */
  wake: (sessionId: string) => Promise<void>;
  /** How often the inbox is read while the first delivery has not settled (ms). */
  pollMs: number;
  /** After this long without a settlement the session is woken, and again as long again (ms). */
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
 * before handing it over: the session is woken for a takeover (and again each lease until the
 * settlement comes), and the takeover enters the unsettled inputs older than a lease, this one
 * among them.
 */
export class RepeatedDeliveries {
  /** Aborted on `close`: ends every repeat's sleep at once. */
  private readonly closing = new AbortController();

  constructor(private readonly parts: RepeatedDeliveriesParts) {
    // Each waiting repeat's sleep listens on this one signal: many at once is normal.
    setMaxListeners(0, this.closing.signal);
  }

  /** Resolves with the first delivery's settlement (`dropped` / `shutdown` if closed first). */
  async follow(message: IncomingMessage & { id: string }): Promise<Settlement> {
    const { signal } = this.closing;
    let wakeAt = Date.now() + this.parts.wakeAfterMs;
    while (!signal.aborted) {
      const entry = await this.parts.inbox.get(message.id).catch(() => undefined);
      if (entry?.settlement) return entry.settlement;
      // Again each lease: a holder running the session meanwhile may have let it go cleanly.
      if (Date.now() >= wakeAt) {
        wakeAt = Date.now() + this.parts.wakeAfterMs;
        await this.parts.wake(message.sessionId).catch(() => undefined);
      }
      await sleep(this.parts.pollMs, undefined, { signal }).catch(() => undefined);
    }
    return SHUTDOWN;
  }

  /** Stops following: the repeats still waiting resolve as dropped (`shutdown`). */
  close(): void {
    this.closing.abort();
  }
}
