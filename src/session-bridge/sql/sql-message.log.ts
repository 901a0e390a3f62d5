import { isoTime, newId } from '../../contracts';
import type { ExpressionBuilder, Insertable, Kysely, Selectable } from 'kysely';
import {
  CONTROL_KINDS,
  WellKnownMetadataKeys,
  type HistoryQuery,
  type HistoryStore,
  type Message,
  type MessageArchive,
  type MessageRole,
  type NewMessage,
  type WriteFencing,
  normaliseDeep,
  normaliseText,
} from '../../contracts';
import { guardedAppend } from './fenced-statements';
import type { Database, MessagesTable, SqlDialect } from './schema';
import { checkFences } from './sql-fences';
import { guarded } from './store-errors';

/** The sessions of `rows`, each with the turn of its first row that names one. */
function sessionTurns(rows: Insertable<MessagesTable>[]): Map<string, string | undefined> {
  const turns = new Map<string, string | undefined>();
  for (const row of rows) {
    if (turns.get(row.session_id) === undefined)
      turns.set(row.session_id, row.turn_id ?? undefined);
  }
  return turns;
}

/** Rows per multi-row INSERT: well under SQLite's and PostgreSQL's bound-parameter limits. */
const INSERT_CHUNK = 500;

/**
 * History and archive over the `messages` table, for SQLite and PostgreSQL alike (written once
 * against Kysely). Serves both the `HistoryStore` and the `MessageArchive` port, with the
 * semantics of `MemoryMessageLog`. Returned messages are fresh objects. Text is kept as
 * `normaliseText` makes it (ids included: PostgreSQL refuses U+0000). A database failure rejects
 * with `StoreUnavailableError`: store `'archive'` for `append`, `'history'` otherwise.
 */
export class SqlMessageLog implements HistoryStore, MessageArchive {
  private lastTime = 0;

  constructor(
    private readonly db: Kysely<Database>,
    /** Distributed mode: appends carry their session's fence (see `WriteFencing`). */
    private readonly fencing?: WriteFencing,
    /** On PostgreSQL a fenced append of one session is one guarded statement. */
    private readonly dialect: SqlDialect = 'sqlite',
  ) {}

  async append(messages: NewMessage[]): Promise<Message[]> {
    return guarded('archive', 'append messages', async () => {
      if (messages.length === 0) return [];
      const rows = messages.map((m) => toRow(normaliseDeep(m), m.createdAt ?? this.now()));
      const fencing = this.dialect === 'postgres' ? this.fencing : undefined;
      if (fencing && (await guardedAppend(this.db, fencing, rows))) return rows.map(fromRow);
      // Unfenced and one statement: atomic alone, without a transaction's two round trips.
      if (!this.fencing && rows.length <= INSERT_CHUNK) {
        if (!rows.some((row) => row.msg_key != null)) {
          await this.db.insertInto('messages').values(rows).execute();
          return rows.map(fromRow);
        }
        if (rows.length === 1)
          return [fromRow(await insertOnce(this.db, rows[0], rows[0].msg_key!))];
      }
      // One transaction: a tool-call group is persisted whole or not at all.
      const stored = await this.db.transaction().execute(async (trx) => {
        if (this.fencing) await checkFences(trx, this.fencing, sessionTurns(rows));
        const out: Array<Selectable<MessagesTable> | Insertable<MessagesTable>> = [];
        let run: Insertable<MessagesTable>[] = [];
        const flush = async () => {
          for (let i = 0; i < run.length; i += INSERT_CHUNK) {
            await trx
              .insertInto('messages')
              .values(run.slice(i, i + INSERT_CHUNK))
              .execute();
          }
          out.push(...run);
          run = [];
        };
        for (const row of rows) {
          if (row.msg_key == null) {
            run.push(row);
            continue;
          }
          await flush();
          out.push(await insertOnce(trx, row, row.msg_key));
        }
        await flush();
        return out;
      });
      return stored.map(fromRow);
    });
  }

  async history(sessionId: string, query: HistoryQuery = {}): Promise<Message[]> {
    sessionId = normaliseText(sessionId);
    return guarded('history', 'read history', async () => {
      const limit = query.limit ?? 0;
      const before = query.before === undefined ? undefined : normaliseText(query.before);
      // The seq of the `before` message of this session (none: nothing is before it).
      const beforeSeq = (eb: ExpressionBuilder<Database, 'messages'>) =>
        eb
          .selectFrom('messages as b')
          .select('b.seq')
          .where('b.session_id', '=', sessionId)
          .where('b.id', '=', before!);
      let select = this.db
        .selectFrom('messages')
        .selectAll()
        .where('session_id', '=', sessionId)
        .orderBy('seq');
      if (before !== undefined) select = select.where((eb) => eb('seq', '<', beforeSeq(eb)));
      if (Number.isInteger(limit) && limit > 0) {
        // The seq of the limit-th newest conversation message, found by one walk backwards over
        // the (session_id, seq) index; control kinds after it come along. Fewer conversation
        // messages than `limit`: no cut-off, everything is returned.
        select = select.where((eb) =>
          eb(
            'seq',
            '>=',
            eb.fn.coalesce(
              eb
                .selectFrom('messages')
                .select('seq')
                .where('session_id', '=', sessionId)
                .where(isConversation)
                .$if(before !== undefined, (q) => q.where((e) => e('seq', '<', beforeSeq(e))))
                .orderBy('seq', 'desc')
                .limit(1)
                .offset(limit - 1),
              eb.lit(0),
            ),
          ),
        );
      }
      return (await select.execute()).map(fromRow);
    });
  }

  /** One row's read: the count is kept by triggers on `messages` (`message_counts`). */
  async count(sessionId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    return guarded('history', 'count messages', async () => {
      const row = await this.db
        .selectFrom('message_counts')
        .select('n')
        .where('session_id', '=', sessionId)
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    });
  }

  async clear(sessionId?: string): Promise<void> {
    if (sessionId !== undefined) sessionId = normaliseText(sessionId);
    return guarded('history', 'clear history', () => this.deleteMessages(sessionId));
  }

  async rollbackTurn(sessionId: string, turnId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    turnId = normaliseText(turnId);
    return guarded('history', 'roll back a turn', async () => {
      const remove = (db: Kysely<Database>) =>
        db
          .deleteFrom('messages')
          .where('session_id', '=', sessionId)
          .where('turn_id', '=', turnId)
          .executeTakeFirst();
      const fencing = this.fencing;
      const result = fencing
        ? await this.db.transaction().execute(async (trx) => {
            await checkFences(trx, fencing, new Map([[sessionId, turnId]]));
            return remove(trx);
          })
        : await remove(this.db);
      return Number(result.numDeletedRows);
    });
  }

  async deleteSession(sessionId: string): Promise<void> {
    sessionId = normaliseText(sessionId);
    return guarded('history', 'delete a session', () => this.deleteMessages(sessionId));
  }

  /**
   * Deletes the messages of `sessionId` (of every session when unset) and, in the same
   * transaction, the kept-count rows that left at zero, so deleted sessions leave no row behind
   * (a missing row counts 0; a row an append raised meanwhile is not zero and stays).
   */
  private deleteMessages(sessionId: string | undefined): Promise<void> {
    return this.db.transaction().execute(async (trx) => {
      let messages = trx.deleteFrom('messages');
      let counts = trx.deleteFrom('message_counts').where('n', '=', 0);
      if (sessionId !== undefined) {
        messages = messages.where('session_id', '=', sessionId);
        counts = counts.where('session_id', '=', sessionId);
      }
      await messages.execute();
      await counts.execute();
    });
  }

  /** Strictly increasing ISO times (per instance), so creation order is also time order. */
  private now(): string {
    this.lastTime = Math.max(Date.now(), this.lastTime + 1);
    return isoTime(this.lastTime);
  }
}

/** A conversation message: no kind, or a kind that is not a control kind. */
function isConversation(eb: ExpressionBuilder<Database, 'messages'>) {
  return eb.or([eb('kind', 'is', null), eb('kind', 'not in', CONTROL_KINDS)]);
}

/**
 * Inserts a keyed message unless its key is already stored; returns what is stored under the
 * key. `ON CONFLICT DO NOTHING` then a read back, so a concurrent writer of the same key waits
 * for the other's commit and then returns its message instead of failing.
 */
async function insertOnce(
  trx: Kysely<Database>,
  row: Insertable<MessagesTable>,
  key: string,
): Promise<Selectable<MessagesTable> | Insertable<MessagesTable>> {
  const result = await trx
    .insertInto('messages')
    .values(row)
    .onConflict((oc) => oc.column('msg_key').doNothing())
    .executeTakeFirst();
  if (Number(result.numInsertedOrUpdatedRows ?? 0) > 0) return row;
  return trx
    .selectFrom('messages')
    .selectAll()
    .where('msg_key', '=', key)
    .executeTakeFirstOrThrow();
}

/** The row of a new message. */
function toRow(m: NewMessage, createdAt: string): Insertable<MessagesTable> {
  const metadata = m.metadata ?? {};
  const turnId = metadata[WellKnownMetadataKeys.TurnId];
  return {
    id: newId(),
    session_id: m.sessionId,
    role: m.role,
    kind: m.kind ?? null,
    content: m.content,
    tool_calls: m.toolCalls === undefined ? null : JSON.stringify(m.toolCalls),
    tool_call_id: m.toolCallId ?? null,
    reasoning_content: m.reasoningContent ?? null,
    metadata: JSON.stringify(metadata),
    turn_id: typeof turnId === 'string' ? turnId : null,
    msg_key: m.key ?? null,
    created_at: createdAt,
  };
}

/** The message of a row; absent optional fields stay absent. */
function fromRow(row: Selectable<MessagesTable> | Insertable<MessagesTable>): Message {
  const message: Message = {
    id: row.id,
    sessionId: row.session_id,
    role: row.role as MessageRole,
    content: row.content,
    metadata: JSON.parse(row.metadata) as Record<string, unknown>,
    createdAt: row.created_at,
  };
  if (row.kind != null) message.kind = row.kind;
  if (row.tool_calls != null)
    message.toolCalls = JSON.parse(row.tool_calls) as Message['toolCalls'];
  if (row.tool_call_id != null) message.toolCallId = row.tool_call_id;
  if (row.reasoning_content != null) message.reasoningContent = row.reasoning_content;
  if (row.msg_key != null) message.key = row.msg_key;
  return message;
}
