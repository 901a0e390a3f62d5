import { sql, type Kysely } from 'kysely';
import { FencedWriteError, normaliseText, type WriteFencing } from '../../contracts';
import type { Database, SqlDialect } from './schema';
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
  unflushed = false,
): Promise<{ newest: true } | { newest: false; current: number }> {
  const row = unflushed
    ? await unflushedClaim(db, sessionId, fence)
    : await db
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
 * `recordFence`'s upsert on PostgreSQL, its transaction committed without waiting for the
 * commit's flush to disk (`synchronous_commit` off for this one statement): the row, if the
 * fence is the newest.
 */
async function unflushedClaim(
  db: Kysely<Database>,
  sessionId: string,
  fence: number,
): Promise<{ fence: unknown } | undefined> {
  const { rows } = await sql<{ fence: unknown }>`
    insert into session_fences (session_id, fence)
    select ${sessionId}::text, ${fence}::bigint
    from (select set_config('synchronous_commit', 'off', true)) as unflushed
    on conflict (session_id) do update set fence = excluded.fence
    where session_fences.fence <= ${fence}::bigint
    returning fence`.execute(db);
  return rows[0];
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
    if (!recorded.newest) refuseWrite(fencing, sessionId, fence, recorded.current);
  }
}

/**
 * Refuses a write of `fence` with `FencedWriteError`, telling `fencing` first (`refused`: its
 * lease is lost, now rather than at the next renewal). A throw of the fencing's own changes
 * nothing: the write is refused all the same.
 */
export function refuseWrite(
  fencing: WriteFencing,
  sessionId: string,
  fence: number,
  current: number,
): never {
  try {
    fencing.refused?.(sessionId, fence);
  } catch {
    // the refusal below is what the caller must see
  }
  throw new FencedWriteError(sessionId, fence, current);
}

/**
 * Distributed mode's fences in the database (table `session_fences`): what a takeover claims
 * before it reads a session's state, so that every later write of the previous holder is
 * refused, and the floor of the next grant (a Redis that lost its data grants no old fence).
 */
export class SqlSessionFences {
  /** `dialect`: the database's (`'postgres'` lets a claim skip the flush, see `claim`). */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect?: SqlDialect,
  ) {}

  /**
   * Claims `fence` for the session: from now on the store refuses writes with older fences.
   * Whether it was granted (false: the store has seen a newer fence, so this claim is stale).
   *
   * `options.flush` (default true): whether the claim waits for its commit's flush to disk.
   * `false` (PostgreSQL; elsewhere ignored) commits the claim without waiting for
   * its flush to disk, one flush less before the session's first turn. Meant for a grant that
   * follows a clean release, whose previous holder has nothing left to write and whose claim is
   * read by nothing: any later write of the new holder flushes the claim with it (the log is
   * written in order), and a claim lost in a database crash before that is taken again by the
   * new holder's first write (a write whose fence is not recorded records it).
   */
  async claim(
    sessionId: string,
    fence: number,
    options: { flush?: boolean } = {},
  ): Promise<boolean> {
    const unflushed = options.flush === false && this.dialect === 'postgres';
    return guarded('sessions', 'claim a session fence', async () => {
      const recorded = await recordFence(this.db, normaliseText(sessionId), fence, unflushed);
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
