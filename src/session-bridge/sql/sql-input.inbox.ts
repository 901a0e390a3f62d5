import type { Insertable, Kysely, Selectable } from 'kysely';
import {
  isoNow,
  normaliseDeep,
  normaliseText,
  type IncomingMessage,
  type InboxEntry,
  type InputInbox,
  type Settlement,
  type WriteFencing,
} from '../../contracts';
import type { Database, InboxTable, SqlDialect } from './schema';
import { guardedInboxUpdate } from './fenced-statements';
import { InboxSessions } from './inbox-sessions';
import { checkFences } from './sql-fences';
import { guarded } from './store-errors';
import { acceptResults, chunks, fromRow, reserveSeqs } from './inbox-rows';

/** Rows per multi-row insert (five parameters each). */
const ROWS_CHUNK = 200;
/** Most accepts written by one transaction. */
const BATCH_MAX = 1000;

type StoredMessage = IncomingMessage & { id: string };
type AcceptResult = { entry: InboxEntry; duplicate: boolean };

/** An accept waiting for its batch's commit. */
interface PendingAccept {
  message: StoredMessage;
  resolve: (result: AcceptResult) => void;
  reject: (error: unknown) => void;
}

/**
 * `InputInbox` over the `inbox` table, for SQLite and PostgreSQL alike (written once against
 * Kysely), with the semantics of `MemoryInputInbox`. Idempotent by id through the primary key:
 * `accept` inserts with `ON CONFLICT DO NOTHING` and reads back what it did not write, so a
 * concurrent duplicate (in this process or another) waits for the other's commit and returns its
 * entry instead of adding a second one. Accepts are group-committed (see `accept`). Returned
 * entries are fresh objects. Text is kept as `normaliseText` makes it (ids included: PostgreSQL refuses
 * U+0000). A database failure rejects with `StoreUnavailableError` (store `'inbox'`).
 */
export class SqlInputInbox implements InputInbox {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: SqlDialect,
    /** Distributed mode: a turn's `enterTurn` and `settle` carry its fence (`WriteFencing`). */
    private readonly fencing?: WriteFencing,
  ) {
    if (fencing && dialect === 'postgres')
      this.sessions = new InboxSessions(db, (id) => fencing.sessionOfInput?.(id));
  }

  /** Fenced on PostgreSQL: the sessions of entries, for one-statement fenced writes. */
  private readonly sessions?: InboxSessions;

  /** Accepts waiting for the next write, in arrival order. */
  private batch: PendingAccept[] = [];
  /** Whether a write of the batch is scheduled or running. */
  private writing = false;

  /**
   * Group commit: the accepts that arrive while a write is scheduled or running are written
   * together by the next one, with one multi-row insert (on PostgreSQL, up to 200 rows: that one
   * statement, returning what it wrote; otherwise one transaction), so a burst of inputs costs a
   * few commits instead of one each and never queues a write per input ahead of every other
   * query. Each caller still resolves only once its input is committed.
   */
  accept(
    given: IncomingMessage & { id: string },
  ): Promise<{ entry: InboxEntry; duplicate: boolean }> {
    const message = normaliseDeep(given);
    return new Promise((resolve, reject) => {
      this.batch.push({ message, resolve, reject });
      this.scheduleWrite();
    });
  }

  private scheduleWrite(): void {
    if (this.writing || !this.batch.length) return;
    this.writing = true;
    // After the current I/O callbacks: inputs read from the network together go together.
    setImmediate(() => void this.writeBatch());
  }

  private async writeBatch(): Promise<void> {
    const batch = this.batch.splice(0, BATCH_MAX);

    try {
      const results = await guarded('inbox', 'accept an input', () =>
        this.insertAll(batch.map((pending) => pending.message)),
      );
      // Committed: each entry's session is known from now on.
      for (const { entry } of results) this.sessions?.learn(entry.id, entry.sessionId);
      batch.forEach((pending, i) => pending.resolve(results[i]));
    } catch (error) {
      // A batch fails as a whole only for a database-wide reason (its rows cannot conflict
      // but by id, which is no error): every input of it is refused alike.
      for (const pending of batch) pending.reject(error);
    } finally {
      this.writing = false;
      this.scheduleWrite();
    }
  }

  /** Inserts the new ones of `messages` (first by id wins) and reads every one back. */
  private insertAll(messages: StoredMessage[]): Promise<AcceptResult[]> {
    const acceptedAt = isoNow();
    const unique = new Map<string, StoredMessage>();
    for (const message of messages) if (!unique.has(message.id)) unique.set(message.id, message);
    const unnumbered = [...unique.values()].map((message) => ({
      id: message.id,
      session_id: message.sessionId,
      message: JSON.stringify(message),
      accepted_at: acceptedAt,
    }));
    if (this.dialect === 'postgres' && unnumbered.length <= ROWS_CHUNK) {
      return this.insertAtOnce(messages, unnumbered);
    }
    return this.db.transaction().execute(async (trx) => {
      // PostgreSQL numbers the rows itself (bigserial); SQLite takes them from its counter.
      const first = this.dialect === 'sqlite' ? await reserveSeqs(trx, unique.size) : undefined;
      const rows =
        first === undefined ? unnumbered : unnumbered.map((row, i) => ({ ...row, seq: first + i }));
      const inserted = new Set<string>();
      for (let at = 0; at < rows.length; at += ROWS_CHUNK) {
        const written = await trx
          .insertInto('inbox')
          .values(rows.slice(at, at + ROWS_CHUNK))
          .onConflict((oc) => oc.column('id').doNothing())
          .returning('id')
          .execute();
        for (const row of written) inserted.add(row.id);
      }
      const stored = new Map<string, Selectable<InboxTable>>();
      for (const chunk of chunks([...unique.keys()])) {
        const found = await trx.selectFrom('inbox').selectAll().where('id', 'in', chunk).execute();
        for (const row of found) stored.set(row.id, row);
      }
      return acceptResults(messages, inserted, stored);
    });
  }

  /**
   * PostgreSQL, one chunk of rows: one statement inserts them and returns what it wrote, atomic
   * without a transaction; only duplicates are read back (after the insert, which waited for
   * a concurrent insert of the same id to commit).
   */
  private async insertAtOnce(
    messages: StoredMessage[],
    rows: Insertable<InboxTable>[],
  ): Promise<AcceptResult[]> {
    const written = await this.db
      .insertInto('inbox')
      .values(rows)
      .onConflict((oc) => oc.column('id').doNothing())
      .returningAll()
      .execute();
    const stored = new Map(written.map((row) => [row.id, row]));
    const inserted = new Set(stored.keys());
    const repeated = rows.map((row) => row.id).filter((id) => !inserted.has(id));
    if (repeated.length) {
      const found = await this.db
        .selectFrom('inbox')
        .selectAll()
        .where('id', 'in', repeated)
        .execute();
      for (const row of found) stored.set(row.id, row);
    }
    return acceptResults(messages, inserted, stored);
  }

  async enterTurn(ids: readonly string[], turnId: string): Promise<void> {
    turnId = normaliseText(turnId);
    await guarded('inbox', 'record the turn of inputs', async () => {
      // A settled entry stays as it settled.
      for (const chunk of chunks(ids))
        await this.updateUnsettled(chunk, turnId, { turn_id: turnId });
    });
  }

  async settle(ids: readonly string[], settlement: Settlement): Promise<void> {
    await guarded('inbox', 'settle inputs', async () => {
      const values = {
        settlement: JSON.stringify(normaliseDeep(settlement)),
        settled_at: isoNow(),
      };
      const turnId = settlement.settled === 'turn' ? normaliseText(settlement.turnId) : undefined;
      // Only unsettled rows: the first settlement stays.
      for (const chunk of chunks(ids)) await this.updateUnsettled(chunk, turnId, values);
    });
  }

  /**
   * Sets `set` on the unsettled entries `ids` names. With fencing: on PostgreSQL, entries of one
   * session in one guarded statement (`guardedInboxUpdate`, the session known from
   * `InboxSessions`); otherwise in one transaction that first checks the fences of their
   * sessions (see `checkFences`).
   */
  private async updateUnsettled(
    ids: string[],
    turnId: string | undefined,
    set: Partial<Record<'turn_id' | 'settlement' | 'settled_at', string>>,
  ): Promise<void> {
    const write = (db: Kysely<Database>) =>
      db
        .updateTable('inbox')
        .set(set)
        .where('id', 'in', ids)
        .where('settled_at', 'is', null)
        .execute();
    const fencing = this.fencing;
    if (!fencing) {
      await write(this.db);
      return;
    }
    if (this.sessions) {
      const sessions = await this.sessions.of(ids);
      if (sessions.size === 0) return;
      const [sessionId] = sessions;
      const guarded = { sessionId, turnId, ids };
      if (sessions.size === 1 && (await guardedInboxUpdate(this.db, fencing, guarded, set))) return;
      this.sessions.forget(ids);
    }
    await this.db.transaction().execute(async (trx) => {
      const rows = await trx
        .selectFrom('inbox')
        .select('session_id')
        .distinct()
        .where('id', 'in', ids)
        .where('settled_at', 'is', null)
        .execute();
      await checkFences(trx, fencing, new Map(rows.map((row) => [row.session_id, turnId])));
      await write(trx);
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
