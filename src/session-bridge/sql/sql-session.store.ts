import { sql, type Kysely } from 'kysely';
import {
  isoNow,
  normaliseDeep,
  normaliseText,
  SessionNotFoundError,
  type SessionActivity,
  type SessionActivityQuery,
  type SessionEnsureOptions,
  type SessionSettings,
  type SessionStore,
} from '../../contracts';
import type { Database, SqlDialect } from './schema';
import { guarded } from './store-errors';

/** Settings as stored: everything but the session id. */
type StoredSettings = Omit<SessionSettings, 'sessionId'>;

/**
 * `SessionStore` over the `sessions` and `generations` tables, for SQLite and PostgreSQL alike
 * (written once against Kysely), with the semantics of `MemorySessionStore`. Generations live in
 * their own table, so deleting settings keeps them (S7). Returned settings are fresh objects.
 * Text is kept as `normaliseText` makes it (session ids included: PostgreSQL refuses U+0000). A
 * database failure rejects with `StoreUnavailableError` (store `'sessions'`).
 */
export class SqlSessionStore implements SessionStore {
  constructor(
    private readonly db: Kysely<Database>,
    /** On PostgreSQL an update merges in one statement (`jsonb`). */
    private readonly dialect: SqlDialect = 'sqlite',
  ) {}

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'read settings', async () => {
      const row = await this.db
        .selectFrom('sessions')
        .select('settings')
        .where('session_id', '=', sessionId)
        .executeTakeFirst();
      return row && parseSettings(sessionId, row.settings);
    });
  }

  async ensure(
    sessionId: string,
    defaults: StoredSettings = {},
    options: SessionEnsureOptions = {},
  ): Promise<SessionSettings> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'create settings', async () => {
      const settings = withoutSessionId(normaliseDeep(defaults));
      const now = isoNow();
      const row = {
        session_id: sessionId,
        kind: settings.kind ?? null,
        settings: JSON.stringify(settings),
        created_at: now,
        updated_at: now,
        active_at: options.activeAt ?? now,
      };
      if (options.activeAt) {
        // An accepted input (every input ensures its settings): one statement creates them or
        // moves the activity on (never back), and answers the settings as stored.
        const stored = await this.db
          .insertInto('sessions')
          .values(row)
          .onConflict((oc) =>
            oc.column('session_id').doUpdateSet({
              active_at: sql<string>`case when sessions.active_at < excluded.active_at then excluded.active_at else sessions.active_at end`,
            }),
          )
          .returning('settings')
          .executeTakeFirstOrThrow();
        return parseSettings(sessionId, stored.settings);
      }
      // Without activity: one read, no write, when the settings exist.
      const existing = await this.get(sessionId);
      if (existing) return existing;
      await this.db
        .insertInto('sessions')
        .values(row)
        .onConflict((oc) => oc.column('session_id').doNothing())
        .execute();
      // Read back: when the settings already existed, they are returned unchanged.
      return (await this.get(sessionId)) ?? parseSettings(sessionId, JSON.stringify(settings));
    });
  }

  async update(sessionId: string, patch: StoredSettings): Promise<SessionSettings> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'update settings', async () => {
      if (this.dialect === 'postgres') return this.updateAtOnce(sessionId, patch);
      return this.db.transaction().execute(async (trx) => {
        // NOTE: write first. It takes the row lock on PostgreSQL and the write lock on SQLite
        // before the read, so concurrent updates merge in turn instead of losing a patch (and
        // SQLite never has to upgrade a read transaction, which fails without waiting).
        // An ended turn moves the activity on (never back), in the same statement.
        const touched = await trx
          .updateTable('sessions')
          .set(touchOf(patch))
          .where('session_id', '=', sessionId)
          .executeTakeFirst();
        if (Number(touched.numUpdatedRows) === 0) throw new SessionNotFoundError(sessionId);
        const row = await trx
          .selectFrom('sessions')
          .select('settings')
          .where('session_id', '=', sessionId)
          .executeTakeFirstOrThrow();
        const merged = withoutSessionId({
          ...(JSON.parse(row.settings) as StoredSettings),
          ...normaliseDeep(patch),
        });
        await trx
          .updateTable('sessions')
          .set({ settings: JSON.stringify(merged), kind: merged.kind ?? null })
          .where('session_id', '=', sessionId)
          .execute();
        return parseSettings(sessionId, JSON.stringify(merged));
      });
    });
  }

  /**
   * PostgreSQL: the update as one statement, which merges the patch into the stored settings
   * itself (top-level keys, as a spread does; a key the patch sets to `undefined` is removed,
   * as JSON leaves it out) under the row lock it takes, so concurrent updates merge in turn.
   */
  private async updateAtOnce(sessionId: string, patch: StoredSettings): Promise<SessionSettings> {
    const given = normaliseDeep(patch) as Record<string, unknown>;
    const removed = ['sessionId', ...Object.keys(given).filter((key) => given[key] === undefined)];
    const merged = sql`((settings::jsonb - ${removed}::text[]) || ${JSON.stringify(withoutSessionId(given))}::jsonb)`;
    const row = await this.db
      .updateTable('sessions')
      .set({
        ...touchOf(patch),
        settings: sql<string>`${merged}::text`,
        kind: sql<string | null>`${merged} ->> 'kind'`,
      })
      .where('session_id', '=', sessionId)
      .returning('settings')
      .executeTakeFirst();
    if (!row) throw new SessionNotFoundError(sessionId);
    return parseSettings(sessionId, row.settings);
  }

  async delete(sessionId: string): Promise<void> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'delete settings', async () => {
      await this.db.deleteFrom('sessions').where('session_id', '=', sessionId).execute();
    });
  }

  async generationOf(sessionId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'read the generation', async () => {
      const row = await this.db
        .selectFrom('generations')
        .select('generation')
        .where('session_id', '=', sessionId)
        .executeTakeFirst();
      return row ? Number(row.generation) : 0;
    });
  }

  async advanceGeneration(sessionId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    return guarded('sessions', 'advance the generation', async () => {
      // One atomic upsert: concurrent callers each get their own, distinct generation.
      const row = await this.db
        .insertInto('generations')
        .values({ session_id: sessionId, generation: 1 })
        .onConflict((oc) =>
          oc
            .column('session_id')
            .doUpdateSet((eb) => ({ generation: eb('generations.generation', '+', 1) })),
        )
        .returning('generation')
        .executeTakeFirstOrThrow();
      return Number(row.generation);
    });
  }

  async list(): Promise<string[]> {
    return guarded('sessions', 'list sessions', async () => {
      const rows = await this.db
        .selectFrom('sessions')
        .select('session_id')
        .orderBy('created_at')
        .orderBy('session_id')
        .execute();
      return rows.map((r) => r.session_id);
    });
  }

  /** One range scan of the `sessions_activity` index, backwards from `after`. */
  async listByActivity(query: SessionActivityQuery): Promise<SessionActivity[]> {
    const { limit, after } = query;
    const only = query.sessionIds?.map((id) => normaliseText(id));
    if (limit < 1 || only?.length === 0) return [];
    return guarded('sessions', 'list sessions by activity', async () => {
      let select = this.db
        .selectFrom('sessions')
        .select(['session_id', 'settings', 'active_at'])
        .orderBy('active_at', 'desc')
        .orderBy('session_id', 'desc')
        .limit(limit);
      if (after) {
        select = select.where((eb) =>
          eb(
            eb.refTuple('active_at', 'session_id'),
            '<',
            // A cursor is the caller's text: kept to what the database can compare.
            eb.tuple(normaliseText(after.activeAt), normaliseText(after.sessionId)),
          ),
        );
      }
      if (only) select = select.where('session_id', 'in', only);
      const rows = await select.execute();
      return rows.map((r) => ({
        settings: parseSettings(r.session_id, r.settings),
        activeAt: r.active_at,
      }));
    });
  }
}

/** What an update sets besides the settings: the time, and the activity an ended turn moves on. */
function touchOf(patch: StoredSettings) {
  const endedAt = patch.lastTurn?.endedAt;
  return {
    updated_at: isoNow(),
    // Never back: a late update of an older turn leaves a newer activity as it is.
    ...(endedAt
      ? {
          active_at: sql<string>`case when active_at < ${endedAt} then ${endedAt} else active_at end`,
        }
      : {}),
  };
}

/** A copy of `settings` without a `sessionId` field (settings never move to another id). */
function withoutSessionId(settings: StoredSettings): StoredSettings {
  const { sessionId: _ignored, ...rest } = settings as SessionSettings;
  return rest;
}

/** Settings from their JSON text, with the session id put back. */
function parseSettings(sessionId: string, json: string): SessionSettings {
  return { ...(JSON.parse(json) as StoredSettings), sessionId };
}
