import {
  Migrator,
  sql,
  type Kysely,
  type Migration,
  type MigrationProvider,
  type MigrationResult,
} from 'kysely';
import type { Database, SqlDialect } from './schema';

/**
 * Versioned schema migrations of the SQL stores, kept in code (no files are read at run time)
 * and recorded in Kysely's migration table (`kysely_migration`). Names sort in run order.
 */
export function sqlMigrations(dialect: SqlDialect): Record<string, Migration> {
  return {
    '0001_initial': {
      async up(db: Kysely<any>): Promise<void> {
        await db.schema
          .createTable('messages')
          .addColumn('seq', dialect === 'postgres' ? 'bigserial' : 'integer', (col) =>
            dialect === 'postgres' ? col.primaryKey() : col.primaryKey().autoIncrement(),
          )
          .addColumn('id', 'text', (col) => col.notNull().unique())
          .addColumn('session_id', 'text', (col) => col.notNull())
          .addColumn('role', 'text', (col) => col.notNull())
          .addColumn('kind', 'text')
          .addColumn('content', 'text', (col) => col.notNull())
          .addColumn('tool_calls', 'text')
          .addColumn('tool_call_id', 'text')
          .addColumn('reasoning_content', 'text')
          .addColumn('metadata', 'text', (col) => col.notNull())
          .addColumn('turn_id', 'text')
          .addColumn('msg_key', 'text')
          .addColumn('created_at', 'text', (col) => col.notNull())
          .execute();
        // History reads walk one session backwards by seq; rollback finds a turn's messages.
        await db.schema
          .createIndex('messages_session_seq')
          .on('messages')
          .columns(['session_id', 'seq'])
          .execute();
        await db.schema
          .createIndex('messages_session_turn')
          .on('messages')
          .columns(['session_id', 'turn_id'])
          .execute();
        // NULLs are distinct in both dialects, so only keyed messages are constrained.
        await db.schema
          .createIndex('messages_msg_key')
          .unique()
          .on('messages')
          .column('msg_key')
          .execute();

        await db.schema
          .createTable('sessions')
          .addColumn('session_id', 'text', (col) => col.primaryKey())
          .addColumn('kind', 'text')
          .addColumn('settings', 'text', (col) => col.notNull())
          .addColumn('created_at', 'text', (col) => col.notNull())
          .addColumn('updated_at', 'text', (col) => col.notNull())
          .execute();

        await db.schema
          .createTable('generations')
          .addColumn('session_id', 'text', (col) => col.primaryKey())
          .addColumn('generation', 'integer', (col) => col.notNull())
          .execute();
      },
      async down(db: Kysely<any>): Promise<void> {
        await db.schema.dropTable('generations').execute();
        await db.schema.dropTable('sessions').execute();
        await db.schema.dropTable('messages').execute();
      },
    },
    '0002_inbox': {
      async up(db: Kysely<any>): Promise<void> {
        await db.schema
          .createTable('inbox')
          .addColumn('id', 'text', (col) => col.primaryKey())
          .addColumn('session_id', 'text', (col) => col.notNull())
          .addColumn('seq', dialect === 'postgres' ? 'bigserial' : 'integer', (col) =>
            col.notNull(),
          )
          .addColumn('message', 'text', (col) => col.notNull())
          .addColumn('accepted_at', 'text', (col) => col.notNull())
          .addColumn('turn_id', 'text')
          .addColumn('settlement', 'text')
          .addColumn('settled_at', 'text')
          .execute();
        // unsettled() and prune() select by settled_at; a session's entries walk by seq.
        await db.schema.createIndex('inbox_settled_at').on('inbox').column('settled_at').execute();
        await db.schema
          .createIndex('inbox_session_seq')
          .on('inbox')
          .columns(['session_id', 'seq'])
          .execute();
        if (dialect === 'sqlite') {
          await db.schema
            .createTable('inbox_counter')
            .addColumn('name', 'text', (col) => col.primaryKey())
            .addColumn('value', 'integer', (col) => col.notNull())
            .execute();
        }
      },
      async down(db: Kysely<any>): Promise<void> {
        if (dialect === 'sqlite') await db.schema.dropTable('inbox_counter').execute();
        await db.schema.dropTable('inbox').execute();
      },
    },
    '0003_session_activity': {
      async up(db: Kysely<any>): Promise<void> {
        // The session list pages by (active_at desc, session_id desc). Binary order on
        // PostgreSQL, whatever the database's collation, so that every store orders alike.
        if (dialect === 'postgres') {
          await sql`alter table sessions alter column session_id type text collate "C"`.execute(db);
        }
        await db.schema
          .alterTable('sessions')
          .addColumn('active_at', dialect === 'postgres' ? sql`text collate "C"` : 'text', (col) =>
            col.notNull().defaultTo(''),
          )
          .execute();
        // Sessions of earlier versions: their last change is their best known activity (the
        // end of their last turn wrote it).
        await sql`update sessions set active_at = updated_at`.execute(db);
        await db.schema
          .createIndex('sessions_activity')
          .on('sessions')
          .columns(['active_at', 'session_id'])
          .execute();
      },
      async down(db: Kysely<any>): Promise<void> {
        await db.schema.dropIndex('sessions_activity').execute();
        await db.schema.alterTable('sessions').dropColumn('active_at').execute();
      },
    },
    '0004_session_fences': {
      async up(db: Kysely<any>): Promise<void> {
        // Distributed mode: the newest lease fence each session's writes carried (or a takeover
        // claimed); a write with an older one is refused.
        await db.schema
          .createTable('session_fences')
          .addColumn('session_id', 'text', (col) => col.primaryKey())
          .addColumn('fence', 'bigint', (col) => col.notNull())
          .execute();
      },
      async down(db: Kysely<any>): Promise<void> {
        await db.schema.dropTable('session_fences').execute();
      },
    },
    '0005_message_counts': {
      async up(db: Kysely<any>): Promise<void> {
        // `count()` read one session's messages whole (13 ms for 100,000 on PostgreSQL, 7 ms of
        // blocked event loop on SQLite, every turn): now a row per session, kept by triggers on
        // every write of `messages`, whoever makes it.
        await db.schema
          .createTable('message_counts')
          .addColumn('session_id', 'text', (col) => col.primaryKey())
          .addColumn('n', 'bigint', (col) => col.notNull())
          .execute();
        await sql`insert into message_counts (session_id, n)
          select session_id, count(*) from messages where ${sql.raw(conversation('messages'))}
          group by session_id`.execute(db);
        for (const statement of countTriggers(dialect)) await sql.raw(statement).execute(db);
      },
      async down(db: Kysely<any>): Promise<void> {
        for (const statement of dropCountTriggers(dialect)) await sql.raw(statement).execute(db);
        await db.schema.dropTable('message_counts').execute();
      },
    },
  };
}

/**
 * A conversation row of `table` (a message without a control kind). NOTE: the control kinds
 * as of migration 0005; a new control kind needs a migration that replaces the triggers.
 */
function conversation(table: string): string {
  return `(${table}.kind is null or ${table}.kind not in ('event-marker', 'turn-stopped'))`;
}

/**
 * The triggers that keep `message_counts`: on PostgreSQL one upsert or update per statement
 * (transition tables), on SQLite one per row (it has no statement triggers; a row's trigger is
 * a step of the same in-process statement).
 */
function countTriggers(dialect: SqlDialect): string[] {
  if (dialect === 'postgres') {
    return [
      `create function message_counts_insert() returns trigger language plpgsql as $$ begin
        insert into message_counts (session_id, n)
          select session_id, count(*) from new_rows where ${conversation('new_rows')} group by session_id
          order by session_id
          on conflict (session_id) do update set n = message_counts.n + excluded.n;
        return null; end $$`,
      `create function message_counts_delete() returns trigger language plpgsql as $$ begin
        update message_counts set n = message_counts.n - d.n
          from (select session_id, count(*) as n from old_rows where ${conversation('old_rows')}
                group by session_id) d
          where message_counts.session_id = d.session_id;
        return null; end $$`,
      `create trigger message_counts_insert after insert on messages
        referencing new table as new_rows for each statement
        execute function message_counts_insert()`,
      `create trigger message_counts_delete after delete on messages
        referencing old table as old_rows for each statement
        execute function message_counts_delete()`,
    ];
  }
  return [
    `create trigger message_counts_insert after insert on messages
      when ${conversation('new')} begin
        insert into message_counts (session_id, n) values (new.session_id, 1)
          on conflict (session_id) do update set n = n + 1;
      end`,
    `create trigger message_counts_delete after delete on messages
      when ${conversation('old')} begin
        update message_counts set n = n - 1 where session_id = old.session_id;
      end`,
  ];
}

/** What `down` drops: the triggers, and on PostgreSQL their functions. */
function dropCountTriggers(dialect: SqlDialect): string[] {
  if (dialect === 'sqlite') {
    return ['drop trigger message_counts_insert', 'drop trigger message_counts_delete'];
  }
  return [
    'drop trigger message_counts_insert on messages',
    'drop trigger message_counts_delete on messages',
    'drop function message_counts_insert()',
    'drop function message_counts_delete()',
  ];
}

/** Kysely `MigrationProvider` over the in-code migrations of one dialect. */
export class InCodeMigrationProvider implements MigrationProvider {
  constructor(private readonly dialect: SqlDialect) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    return sqlMigrations(this.dialect);
  }
}

/**
 * Brings the schema to the latest version; returns the names of the migrations it ran (none
 * when the schema is current, so running it again is a no-op). Safe when several processes
 * start at once: PostgreSQL runs it under Kysely's migration lock, SQLite inside one
 * `BEGIN IMMEDIATE` transaction (SQLite's DDL is transactional). Throws the migration's error.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  dialect: SqlDialect,
): Promise<string[]> {
  if (dialect === 'postgres') {
    // NOTE: without an explicit schema, Kysely's migrator looks for its table in every schema
    // and would find another schema's; pin it to the one this connection writes to.
    const { rows } = await sql<{
      schema: string | null;
    }>`select current_schema() as schema`.execute(db);
    return run(db, dialect, rows[0]?.schema ?? undefined);
  }
  return db.connection().execute(async (conn) => {
    await sql`begin immediate`.execute(conn);
    try {
      const names = await run(conn, dialect, undefined);
      await sql`commit`.execute(conn);
      return names;
    } catch (error) {
      await sql`rollback`.execute(conn);
      throw error;
    }
  });
}

/** Runs Kysely's migrator and turns its `{ error }` result into a throw. */
async function run(
  db: Kysely<Database>,
  dialect: SqlDialect,
  migrationTableSchema: string | undefined,
): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: new InCodeMigrationProvider(dialect),
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error) {
    const failed = results.find((r: MigrationResult) => r.status === 'Error');
    const reason = error instanceof Error ? error.message : JSON.stringify(error);
    throw new Error(failed ? `migration "${failed.migrationName}" failed: ${reason}` : reason, {
      cause: error,
    });
  }
  return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
