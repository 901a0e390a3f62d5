import { frozenCopy } from './frozen-copy';
import {
  isoNow,
  normaliseDeep,
  normaliseText,
  type IncomingMessage,
  type InboxAcceptOptions,
  type InboxEntry,
  type InputInbox,
  type Settlement,
} from '../../contracts';

/**
 * An entry as kept: what is set later (turn, settlement, the time it settled, kept for `prune`)
 * beside the accepted entry, every field present from the start, so the record keeps them in
 * itself (no separate property store per entry).
 */
interface Stored {
  entry: InboxEntry;
  /** Its id was generated (no delivery can repeat it): forgotten once it settles. */
  forget: boolean;
  turnId: string | undefined;
  settlement: Settlement | undefined;
  settledAt: string | undefined;
}

/**
 * In-memory `InputInbox`: the accepted inputs of this process only (a restart loses them; use a
 * SQL inbox to resume after one). Inputs and settlements are copied once, frozen; returned
 * entries are the reader's own at their top levels (see `readCopy`). Text is kept as `normaliseText`
 * makes it (ids included), as the SQL inboxes keep it. Settled entries are kept for
 * deduplication (at most `maxSettled`), except those accepted with `generatedId`: no delivery
 * can repeat their id, so they are forgotten as they settle.
 */
export class MemoryInputInbox implements InputInbox {
  /** By id, in acceptance order (an entry is never re-inserted), so also in `seq` order. */
  private readonly entries = new Map<string, Stored>();
  private lastSeq = 0;
  private settledCount = 0;

  constructor(
    /**
     * Settled entries kept for deduplication; past it the oldest are forgotten, so memory stays
     * bounded however long the process runs. @default 10000
     */
    private readonly maxSettled = 10_000,
  ) {}

  async accept(
    given: IncomingMessage & { id: string },
    options?: InboxAcceptOptions,
  ): Promise<{ entry: InboxEntry; duplicate: boolean }> {
    const message = normaliseDeep(given);
    const known = this.entries.get(message.id);
    if (known) return { entry: readCopy(known), duplicate: true };
    const entry: InboxEntry = {
      id: message.id,
      sessionId: message.sessionId,
      message: frozenCopy(message),
      seq: ++this.lastSeq,
      acceptedAt: isoNow(),
    };
    const stored: Stored = {
      entry,
      forget: options?.generatedId === true,
      turnId: undefined,
      settlement: undefined,
      settledAt: undefined,
    };
    this.entries.set(entry.id, stored);
    return { entry: readCopy(stored), duplicate: false };
  }

  async enterTurn(ids: readonly string[], turnId: string): Promise<void> {
    for (const id of ids) {
      const stored = this.entries.get(normaliseText(id));
      // A settled entry stays as it settled.
      if (stored && !stored.settlement) stored.turnId = normaliseText(turnId);
    }
  }

  async settle(ids: readonly string[], settlement: Settlement): Promise<void> {
    const settledAt = isoNow();
    let frozen: Settlement | undefined;
    for (const id of ids) {
      const key = normaliseText(id);
      const stored = this.entries.get(key);
      if (!stored || stored.settlement) continue;
      if (stored.forget) {
        // Kept only for deduplication, which a generated id cannot need.
        this.entries.delete(key);
        continue;
      }
      stored.settlement = frozen ??= frozenCopy(normaliseDeep(settlement));
      stored.settledAt = settledAt;
      this.settledCount++;
    }
    if (this.settledCount > this.maxSettled) this.forgetOldestSettled();
  }

  /**
   * Drops the oldest settled entries (acceptance order) until at most `maxSettled` remain, and
   * a sixteenth of it more: the walk starts at the oldest entry each time (over the gaps the
   * forgotten ones leave), so it runs once per many settlements, not once per settlement.
   */
  private forgetOldestSettled(): void {
    const keep = this.maxSettled - Math.floor(this.maxSettled / 16);
    for (const [id, stored] of this.entries) {
      if (this.settledCount <= keep) return;
      if (stored.settledAt === undefined) continue;
      this.entries.delete(id);
      this.settledCount--;
    }
  }

  async get(id: string): Promise<InboxEntry | undefined> {
    const stored = this.entries.get(normaliseText(id));
    return stored && readCopy(stored);
  }

  async unsettled(sessionId?: string): Promise<InboxEntry[]> {
    const session = sessionId === undefined ? undefined : normaliseText(sessionId);
    return [...this.entries.values()]
      .filter((s) => !s.settlement && (session === undefined || s.entry.sessionId === session))
      .map(readCopy);
  }

  async prune(before: string): Promise<number> {
    const cutoff = normaliseText(before);
    let pruned = 0;
    for (const [id, stored] of this.entries) {
      if (stored.settledAt !== undefined && stored.settledAt < cutoff) {
        this.entries.delete(id);
        this.settledCount--;
        pruned++;
      }
    }
    return pruned;
  }

  async deleteSession(sessionId: string): Promise<void> {
    const session = normaliseText(sessionId);
    for (const [id, stored] of this.entries) {
      if (stored.entry.sessionId !== session) continue;
      if (stored.settledAt !== undefined) this.settledCount--;
      this.entries.delete(id);
    }
  }
}

/**
 * What a reader gets: its own entry, message, message metadata and settlement over the frozen
 * stored values (nested values are shared and read-only), instead of a deep clone per read.
 */
function readCopy({ entry, turnId, settlement }: Stored): InboxEntry {
  const { message } = entry;
  const copy: InboxEntry = {
    ...entry,
    message: message.metadata ? { ...message, metadata: { ...message.metadata } } : { ...message },
  };
  if (turnId !== undefined) copy.turnId = turnId;
  if (settlement) copy.settlement = { ...settlement };
  return copy;
}
