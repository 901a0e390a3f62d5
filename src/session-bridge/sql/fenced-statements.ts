import { sql, type Insertable, type Kysely, type RawBuilder } from 'kysely';
import type { WriteFencing } from '../../contracts';
import type { Database, MessagesTable } from './schema';
import { refuseWrite } from './sql-fences';

/**
 * Distributed mode's fenced writes on PostgreSQL in one statement each (no transaction, no
 * upsert of `session_fences` per write): the statement locks the session's fence row `FOR
 * SHARE` and writes only if the fence there is the write's own. A takeover claims its fence by
 * updating that row, so it waits for a write that holds the lock (the write lands before the
 * takeover reads anything), and a write that comes after the claim finds the newer fence and
 * writes nothing. The holder's fence is in the row from its claim, so this is the common case;
 * when the row has no fence yet or an older one (a write without a claim before it), nothing is
 * written and the caller takes the slow path, which records the fence (`checkFences`).
 */

/** What a guarded statement did: written (with how many rows), or not (fence not recorded). */
type Guarded = { written: true; rows: number } | { written: false };

/**
 * Runs `write` (a data-modifying statement, without `RETURNING`, whose `WHERE` ends with the
 * guard it is given) for `sessionId` only if the session's recorded fence is `fence`: see above.
 * Throws `FencedWriteError` when a newer fence is recorded.
 */
async function guardedWrite(
  db: Kysely<Database>,
  fencing: WriteFencing,
  sessionId: string,
  fence: number,
  write: (guard: RawBuilder<boolean>) => RawBuilder<unknown>,
): Promise<Guarded> {
  const guard = sql<boolean>`(select fence from f) = ${fence}`;
  // A data-modifying `with` runs once and to completion, read or not.
  const { rows } = await sql<{ current: string | number | null; n: string | number }>`
    with f as (select fence from session_fences where session_id = ${sessionId} for share),
    w as (${write(guard)} returning 1)
    select (select fence from f) as current, (select count(*) from w) as n`.execute(db);
  const current = rows[0]?.current == null ? undefined : Number(rows[0].current);
  if (current === fence) return { written: true, rows: Number(rows[0].n) };
  if (current !== undefined && current > fence) refuseWrite(fencing, sessionId, fence, current);
  return { written: false };
}

/** The columns a message row is inserted with, in one order. */
const MESSAGE_COLUMNS = [
  'id',
  'session_id',
  'role',
  'kind',
  'content',
  'tool_calls',
  'tool_call_id',
  'reasoning_content',
  'metadata',
  'turn_id',
  'msg_key',
  'created_at',
] as const;

/** Most rows a guarded append inserts (its parameters stay far below PostgreSQL's limit). */
const GUARDED_ROWS_MAX = 500;

/**
 * Appends `rows` in one guarded statement when they are of one session, carry no idempotency
 * key (those insert one by one) and the session has a fence: whether it was done. False: the
 * caller takes the transactional path. Throws `FencedWriteError` when refused.
 */
export async function guardedAppend(
  db: Kysely<Database>,
  fencing: WriteFencing,
  rows: Insertable<MessagesTable>[],
): Promise<boolean> {
  const sessionId = rows[0]?.session_id;
  if (!sessionId || rows.length > GUARDED_ROWS_MAX) return false;
  if (rows.some((row) => row.session_id !== sessionId || row.msg_key != null)) return false;
  const turnId = rows.find((row) => row.turn_id != null)?.turn_id ?? undefined;
  const fence = fencing.fenceFor(sessionId, turnId);
  if (fence === undefined) return false;
  const columns = sql.join(MESSAGE_COLUMNS.map((column) => sql.ref(column)));
  const values = sql.join(
    rows.map((row) => sql`(${sql.join(MESSAGE_COLUMNS.map((column) => row[column] ?? null))})`),
  );
  const written = await guardedWrite(
    db,
    fencing,
    sessionId,
    fence,
    (guard) =>
      sql`insert into messages (${columns}) select * from (values ${values}) as v (${columns}) where ${guard}`,
  );
  return written.written;
}

/**
 * Updates the unsettled inbox entries `ids` of `sessionId` with `set` in one guarded statement
 * when the session has a fence (else unfenced, as `checkFences` would let it): whether it updated
 * any. False (the fence not recorded, or no entry of `ids` is an unsettled one of `sessionId`):
 * the caller takes the transactional path, which finds the entries' sessions itself. Throws
 * `FencedWriteError` when refused.
 */
export async function guardedInboxUpdate(
  db: Kysely<Database>,
  fencing: WriteFencing,
  write: { sessionId: string; turnId: string | undefined; ids: string[] },
  set: Partial<Record<'turn_id' | 'settlement' | 'settled_at', string>>,
): Promise<boolean> {
  const { sessionId, turnId, ids } = write;
  const fence = fencing.fenceFor(sessionId, turnId);
  const assignments = sql.join(
    Object.entries(set).map(([column, value]) => sql`${sql.ref(column)} = ${value}`),
  );
  const update = (guard: RawBuilder<boolean>) =>
    sql`update inbox set ${assignments} where id in (${sql.join(ids)}) and session_id = ${sessionId} and settled_at is null and ${guard}`;
  if (fence === undefined) {
    const { numAffectedRows } = await update(sql<boolean>`true`).execute(db);
    return Number(numAffectedRows ?? 0) > 0;
  }
  const written = await guardedWrite(db, fencing, sessionId, fence, update);
  return written.written && written.rows > 0;
}
