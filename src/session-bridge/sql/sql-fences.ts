import type { Kysely } from 'kysely';
import { FencedWriteError, normaliseText, type WriteFencing } from '../../contracts';
import type { Database } from './schema';
import { guarded } from './store-errors';

/**
 * Records `fence` as the session's newest, unless a newer one was seen: one atomic upsert that
 * also locks the session's row until the caller's transaction ends, so two writers of one
 * session with different fences are ordered. Whether `fence` is (now) the newest; when it is not,
 * resolves with the newest seen.
 */
async function recordFence(
  db: Kysely<Database>,
  sessionId: string,
  fence: number,
): Promise<{ newest: true } | { newest: false; current: number }> {
  const row = await db
    .insertInto('session_fences')
    .values({ session_id: sessionId, fence })
    .onConflict((oc) =>
      oc
        .column('session_id')
        .doUpdateSet((eb) => ({ fence: eb.ref('excluded.fence') }))
        .where('session_fences.fence', '<=', fence),
    )
    .returning('fence')
    .executeTakeFirst();
  if (row) return { newest: true };
  const seen = await db
    .selectFrom('session_fences')
    .select('fence')
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  return { newest: false, current: Number(seen?.fence ?? fence) };
}

/**
 * Inside a write's transaction: refuses the write with `FencedWriteError` when `fencing` gives
 * one of the written sessions (with the turn the write is of) a fence older than one the store
 * has seen (no fence for a session: nothing is checked for it). Sessions are checked in one order, so that two transactions
 * over the same sessions lock their rows alike. On PostgreSQL a holder's writes of one session
 * whose fence is recorded take the one-statement path of `fenced-statements.ts` instead; this
 * is the path of the rest (SQLite, several sessions at once, a fence not recorded yet).
 */
export async function checkFences(
  trx: Kysely<Database>,
  fencing: WriteFencing,
  writes: ReadonlyMap<string, string | undefined>,
): Promise<void> {
  for (const sessionId of [...writes.keys()].sort()) {
    const fence = fencing.fenceFor(sessionId, writes.get(sessionId));
    if (fence === undefined) continue;
    const recorded = await recordFence(trx, sessionId, fence);
    if (!recorded.newest) throw new FencedWriteError(sessionId, fence, recorded.current);
  }
}

/**
 * Distributed mode's fences in the database (table `session_fences`): what a takeover claims
 * before it reads a session's state, so that every later write of the previous holder is
 * refused, and the floor of the next grant (a Redis that lost its data grants no old fence).
 */
export class SqlSessionFences {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Claims `fence` for the session: from now on the store refuses writes with older fences.
   * Whether it was granted (false: the store has seen a newer fence, so this claim is stale).
   */
  async claim(sessionId: string, fence: number): Promise<boolean> {
    return guarded('sessions', 'claim a session fence', async () => {
      const recorded = await recordFence(this.db, normaliseText(sessionId), fence);
      return recorded.newest;
    });
  }

  /** The newest fence the store has seen for the session; 0 when none. */
  async current(sessionId: string): Promise<number> {
    return guarded('sessions', 'read a session fence', async () => {
      const row = await this.db
        .selectFrom('session_fences')
        .select('fence')
        .where('session_id', '=', normaliseText(sessionId))
        .executeTakeFirst();
      return Number(row?.fence ?? 0);
    });
  }
}
