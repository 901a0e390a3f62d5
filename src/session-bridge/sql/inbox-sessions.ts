import type { Kysely } from 'kysely';
import { normaliseText } from '../../contracts';
import type { Database } from './schema';

/** How many inputs' sessions are remembered (the oldest are forgotten first). */
const REMEMBERED = 10_000;

/**
 * The session of each inbox entry, remembered as the fenced inbox writes of distributed mode
 * learn it (an entry's session never changes), so that a turn's `enterTurn` and `settle` find
 * the session to fence without a query of their own: learned when this instance accepted an
 * input, told by the fencing for an input another instance accepted that runs here (its session
 * came with it), or else read once. An id reused for another session (after its entry was
 * pruned or deleted), or a wrong hint, is caught by the write, which then forgets it.
 */
export class InboxSessions {
  private readonly known = new Map<string, string>();

  constructor(
    private readonly db: Kysely<Database>,
    /** The session of an entry as the fencing knows it, if it does (`sessionOfInput`). */
    private readonly hint: (id: string) => string | undefined = () => undefined,
  ) {}

  /** Remembers the session of an entry. */
  learn(id: string, sessionId: string): void {
    this.known.delete(id);
    this.known.set(id, sessionId);
    if (this.known.size > REMEMBERED) this.known.delete(this.known.keys().next().value!);
  }

  /** Forgets the sessions of `ids` (read again next time). */
  forget(ids: readonly string[]): void {
    for (const id of ids) this.known.delete(id);
  }

  /** The sessions of the entries `ids` (normalised) that exist, read for those not known. */
  async of(ids: readonly string[]): Promise<Set<string>> {
    const sessions = new Set<string>();
    const unknown: string[] = [];
    for (const id of ids) {
      let sessionId = this.known.get(id);
      const hinted = sessionId === undefined ? this.hint(id) : undefined;
      if (hinted !== undefined) this.learn(id, (sessionId = normaliseText(hinted)));
      if (sessionId === undefined) unknown.push(id);
      else sessions.add(sessionId);
    }
    if (unknown.length) {
      const rows = await this.db
        .selectFrom('inbox')
        .select(['id', 'session_id'])
        .where('id', 'in', unknown)
        .execute();
      for (const row of rows) {
        this.learn(row.id, row.session_id);
        sessions.add(row.session_id);
      }
    }
    return sessions;
  }
}
