import type { Kysely, Selectable } from 'kysely';
import {
  normaliseDeep,
  normaliseText,
  type IncomingMessage,
  type InboxEntry,
  type InputInbox,
  type Settlement,
} from '../../contracts';
import type { Database, InboxTable, SqlDialect } from './schema';
import { guarded } from './store-errors';

/** Ids per `in (...)` list: well under SQLite's and PostgreSQL's bound-parameter limits. */
const IDS_CHUNK = 500;

/**
 * `InputInbox` over the `inbox` table, for SQLite and PostgreSQL alike (written once against
 * Kysely), with the semantics of `MemoryInputInbox`. Idempotent by id through the primary key:
 * `accept` inserts with `ON CONFLICT DO NOTHING` and reads back, so a concurrent duplicate waits
 * for the other's commit and returns its entry instead of adding a second one. Returned entries
 * are fresh objects. Text is kept as `normaliseText` makes it (ids included: PostgreSQL refuses
 * U+0000). A database failure rejects with `StoreUnavailableError` (store `'inbox'`).
 */
export class SqlInputInbox implements InputInbox {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: SqlDialect,
  ) {}

  async accept(
    given: IncomingMessage & { id: string },
  ): Promise<{ entry: InboxEntry; duplicate: boolean }> {
    const message = normaliseDeep(given);
    return guarded('inbox', 'accept an input', async () => {
      const row = {
        id: message.id,
        session_id: message.sessionId,
        message: JSON.stringify(message),
        accepted_at: new Date().toISOString(),
      };
      return this.db.transaction().execute(async (trx) => {
        // PostgreSQL numbers the row itself (bigserial); SQLite takes the counter's next value.
        const seq = this.dialect === 'sqlite' ? await nextSeq(trx) : undefined;
        const result = await trx
          .insertInto('inbox')
          .values(seq === undefined ? row : { ...row, seq })
          .onConflict((oc) => oc.column('id').doNothing())
          .executeTakeFirst();
        const stored = await trx
          .selectFrom('inbox')
          .selectAll()
          .where('id', '=', message.id)
          .executeTakeFirstOrThrow();
        const inserted = Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
        return { entry: fromRow(stored), duplicate: !inserted };
      });
    });
  }

  async enterTurn(ids: readonly string[], turnId: string): Promise<void> {
    await guarded('inbox', 'record the turn of inputs', async () => {
      for (const chunk of chunks(ids)) {
        // A settled entry stays as it settled.
        await this.db
          .updateTable('inbox')
          .set({ turn_id: normaliseText(turnId) })
          .where('id', 'in', chunk)
          .where('settled_at', 'is', null)
          .execute();
      }
    });
  }

  async settle(ids: readonly string[], settlement: Settlement): Promise<void> {
    await guarded('inbox', 'settle inputs', async () => {
      const values = {
        settlement: JSON.stringify(normaliseDeep(settlement)),
        settled_at: new Date().toISOString(),
      };
      for (const chunk of chunks(ids)) {
        // Only unsettled rows: the first settlement stays.
        await this.db
          .updateTable('inbox')
          .set(values)
          .where('id', 'in', chunk)
          .where('settled_at', 'is', null)
          .execute();
      }
    });
  }

  async get(id: string): Promise<InboxEntry | undefined> {
    return guarded('inbox', 'read an input', async () => {
      const row = await this.db
        .selectFrom('inbox')
        .selectAll()
        .where('id', '=', normaliseText(id))
        .executeTakeFirst();
      return row && fromRow(row);
    });
  }

  async unsettled(sessionId?: string): Promise<InboxEntry[]> {
    return guarded('inbox', 'list unsettled inputs', async () => {
      let select = this.db
        .selectFrom('inbox')
        .selectAll()
        .where('settled_at', 'is', null)
        .orderBy('seq');
      if (sessionId !== undefined) {
        select = select.where('session_id', '=', normaliseText(sessionId));
      }
      return (await select.execute()).map(fromRow);
    });
  }

  async prune(before: string): Promise<number> {
    return guarded('inbox', 'prune settled inputs', async () => {
      const result = await this.db
        .deleteFrom('inbox')
        .where('settled_at', 'is not', null)
        .where('settled_at', '<', normaliseText(before))
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }

  async deleteSession(sessionId: string): Promise<void> {
    await guarded('inbox', 'delete a session', async () => {
      await this.db
        .deleteFrom('inbox')
        .where('session_id', '=', normaliseText(sessionId))
        .execute();
    });
  }
}

/** SQLite: the inbox counter's next value, in the caller's transaction (one atomic upsert). */
async function nextSeq(trx: Kysely<Database>): Promise<number> {
  const row = await trx
    .insertInto('inbox_counter')
    .values({ name: 'inbox', value: 1 })
    .onConflict((oc) =>
      oc.column('name').doUpdateSet((eb) => ({ value: eb('inbox_counter.value', '+', 1) })),
    )
    .returning('value')
    .executeTakeFirstOrThrow();
  return Number(row.value);
}

/** `ids`, normalised, in lists of at most `IDS_CHUNK`, without duplicates; none for none. */
function chunks(ids: readonly string[]): string[][] {
  const unique = [...new Set(ids.map(normaliseText))];
  const out: string[][] = [];
  for (let i = 0; i < unique.length; i += IDS_CHUNK) out.push(unique.slice(i, i + IDS_CHUNK));
  return out;
}

/** The entry of a row; absent optional fields stay absent. */
function fromRow(row: Selectable<InboxTable>): InboxEntry {
  const entry: InboxEntry = {
    id: row.id,
    sessionId: row.session_id,
    message: JSON.parse(row.message) as InboxEntry['message'],
    seq: Number(row.seq),
    acceptedAt: row.accepted_at,
  };
  if (row.turn_id != null) entry.turnId = row.turn_id;
  if (row.settlement != null) entry.settlement = JSON.parse(row.settlement) as Settlement;
  return entry;
}
