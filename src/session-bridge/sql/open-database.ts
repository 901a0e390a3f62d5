import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Kysely } from 'kysely';
import type BetterSqlite3 from 'better-sqlite3';
import type { Pool, PoolConfig } from 'pg';
import { AgentError, type WriteFencing } from '../../contracts';
import { migrateToLatest } from './migrations';
import { discardingBrokenClients, postgresTimeouts, warnedStatementNames } from './postgres-pool';
import { SchemaScopedPostgresDialect } from './postgres-introspector';
import type { Database, SqlDialect } from './schema';
import { SqlSessionFences } from './sql-fences';
import { SqlInputInbox } from './sql-input.inbox';
import { SqlMessageLog } from './sql-message.log';
import { SqlSessionStore } from './sql-session.store';
import { FileLock, FileLockedSqliteDialect } from './sqlite-file-lock';
import { StatementCache } from './sqlite-statement-cache';

/** The configuration variable that names the database, as it appears in error messages. */
const SETTING = 'AGENT_DB';

/** Default of `SqlStoreOptions.timeoutMs`. */
const DEFAULT_TIMEOUT_MS = 10_000;

/** Options of `openDatabase` and `createSqlStores`. */
export interface SqlStoreOptions {
  /**
   * The longest a store call waits on the database, in milliseconds: PostgreSQL's connect,
   * pool and query timeouts, SQLite's busy timeout. A call that hits it rejects with
   * `StoreUnavailableError` instead of hanging. @default 10000
   */
  timeoutMs?: number;
  /**
   * Distributed mode: the fences the stores' turn writes carry (history appends and rollbacks,
   * the inbox's `enterTurn` and `settle`); a write with a fence older than one the database has
   * seen is refused with `FencedWriteError`. Unset: no write is fenced.
   */
  fencing?: WriteFencing;
  /**
   * PostgreSQL: run each statement as a named prepared statement, parsed and planned once per
   * connection (the first 256 distinct statements; a third less of PostgreSQL's CPU per turn).
   * Set `false` behind a pooler that cannot keep them: PgBouncer in transaction mode before
   * 1.21 or without `max_prepared_statements`, or a proxy that pins connections on them. A
   * pooler found losing them (SQLSTATE `26000`, `42P05`) turns them off for the pool with one
   * warning. Ignored for SQLite, whose statements are always prepared once. @default true
   */
  prepare?: boolean;
}

/**
 * The database could not be opened or brought to the current schema. The message is one line
 * that names AGENT_DB and the database; `cause` holds the driver's error.
 */
export class StoreOpenError extends AgentError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    if (options && 'cause' in options) this.cause = options.cause;
  }
}

/** An open database of the SQL stores. */
export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: SqlDialect;
  /** Closes the connections (pool or file); safe to call more than once. */
  close(): Promise<void>;
}

/** The SQL stores over one open and migrated database. */
export interface SqlStores {
  sessions: SqlSessionStore;
  /** `HistoryStore` and `MessageArchive` at once. */
  log: SqlMessageLog;
  /** The `InputInbox`. */
  inbox: SqlInputInbox;
  /** Distributed mode's session fences (claimed by a takeover; see `SqlStoreOptions.fencing`). */
  fences: SqlSessionFences;
  /** The fencing the stores were created with (`SqlStoreOptions.fencing`), if any. */
  fencing?: WriteFencing;
  dialect: SqlDialect;
  /** Closes the database; safe to call more than once. */
  close(): Promise<void>;
}

/** Whether `url` names a PostgreSQL database rather than a SQLite file. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * Opens the database `url` names: `postgres://` / `postgresql://` -> a `pg` pool (connect, pool
 * and query timeouts of `timeoutMs`), anything else -> a SQLite file (WAL, `busy_timeout` of
 * `timeoutMs`, `synchronous = NORMAL`; the parent directory is created). Drivers are optional
 * packages loaded here, lazily. Checks the connection before it returns. Throws
 * `StoreOpenError` (one line naming AGENT_DB) when it cannot.
 */
export async function openDatabase(
  url: string,
  options: SqlStoreOptions = {},
): Promise<OpenDatabase> {
  const timeoutMs = timeoutOf(url, options);
  if (isPostgresUrl(url)) return openPostgres(url, timeoutMs, options.prepare !== false);
  if (/^[a-z][a-z0-9+.-]+:\/\//i.test(url)) {
    throw new StoreOpenError(
      `${SETTING} "${redact(url)}" is neither a postgres:// URL nor a SQLite file path`,
    );
  }
  return openSqlite(url, timeoutMs);
}

/**
 * Opens the database `url` names (see `openDatabase`), runs the migrations, and returns the
 * stores over it. Throws `StoreOpenError` when the database cannot be opened or migrated; once
 * open, a store call the database fails rejects with `StoreUnavailableError`.
 */
export async function createSqlStores(
  url: string,
  options: SqlStoreOptions = {},
): Promise<SqlStores> {
  const opened = await openDatabase(url, options);
  try {
    await migrateToLatest(opened.db, opened.dialect);
  } catch (error) {
    await opened.close();
    throw new StoreOpenError(`${SETTING} "${redact(url)}" cannot be migrated: ${reason(error)}`, {
      cause: error,
    });
  }
  const stores: SqlStores = {
    sessions: new SqlSessionStore(opened.db, opened.dialect),
    log: new SqlMessageLog(opened.db, options.fencing, opened.dialect),
    inbox: new SqlInputInbox(opened.db, opened.dialect, options.fencing),
    fences: new SqlSessionFences(opened.db, opened.dialect),
    ...(options.fencing ? { fencing: options.fencing } : {}),
    dialect: opened.dialect,
    close: opened.close,
  };
  for (const port of [stores.sessions, stores.log, stores.inbox]) madeBy.set(port, stores);
  return stores;
}

/** The stores each port object of `createSqlStores` belongs to. */
const madeBy = new WeakMap<object, SqlStores>();

/**
 * The `SqlStores` that `port` (its `sessions`, `log` or `inbox`) was made with by
 * `createSqlStores`; `undefined` for any other object. Lets distributed mode find its fences and
 * fencing from the ports the agent is bound to.
 */
export function sqlStoresOf(port: unknown): SqlStores | undefined {
  return typeof port === 'object' && port !== null ? madeBy.get(port) : undefined;
}

/** The validated `timeoutMs` option (the database `url` names the error). */
function timeoutOf(url: string, options: SqlStoreOptions): number {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new StoreOpenError(
      `${SETTING} "${redact(url)}" cannot be opened: timeoutMs must be a positive whole number of milliseconds, got ${String(timeoutMs)}`,
    );
  }
  return timeoutMs;
}

/**
 * `mkdir -p` one level at a time: Node 20's `mkdirSync(..., { recursive: true })` never returns
 * for a path under `/proc` (it loops on the error), so a mistaken `AGENT_DB` would hang start-up.
 */
function makeDirectory(dir: string): void {
  if (existsSync(dir)) return;
  const parent = dirname(dir);
  if (parent !== dir) makeDirectory(parent);
  try {
    mkdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

async function openSqlite(path: string, timeoutMs: number): Promise<OpenDatabase> {
  const Sqlite = loadOptional<typeof BetterSqlite3>(
    'better-sqlite3',
    `${SETTING} is a SQLite file path but the optional package "better-sqlite3" is not installed: npm install better-sqlite3`,
  );
  const inMemory = path === ':memory:' || path === '';
  let handle: BetterSqlite3.Database | undefined;
  try {
    if (!inMemory) makeDirectory(dirname(resolve(path)));
    handle = new Sqlite(path);
    // busy_timeout first: the other pragmas may have to wait for another process.
    handle.pragma(`busy_timeout = ${timeoutMs}`);
    handle.pragma('journal_mode = WAL');
    handle.pragma('synchronous = NORMAL');
    // Reads the header (a corrupted file fails here) and proves the file is writable.
    handle.exec('BEGIN IMMEDIATE; ROLLBACK');
  } catch (error) {
    handle?.close();
    throw new StoreOpenError(`${SETTING} "${path}" cannot be opened: ${reason(error)}`, {
      cause: error,
    });
  }
  const database = handle;
  const lock = inMemory ? undefined : FileLock.retain(resolve(path));
  const db = new Kysely<Database>({
    dialect: new FileLockedSqliteDialect({ database: new StatementCache(database) }, lock),
  });
  return withClose(db, 'sqlite', () => {
    // Kysely closes the file only if it ever ran a query.
    if (database.open) database.close();
    lock?.release();
  });
}

async function openPostgres(
  url: string,
  timeoutMs: number,
  prepare: boolean,
): Promise<OpenDatabase> {
  const pg = loadOptional<typeof import('pg')>(
    'pg',
    `${SETTING} is a PostgreSQL URL but the optional package "pg" is not installed: npm install pg`,
  );
  // The URL's own parameters (connect_timeout, options, ...) take precedence over these.
  const config: PoolConfig = { connectionString: url, ...postgresTimeouts(timeoutMs) };
  const pool: Pool = new pg.Pool(config);
  // NOTE: an idle client that loses its server emits 'error' on the pool; unhandled, that event
  // would crash the process. The next query fails on its own and reports the cause.
  pool.on('error', () => undefined);
  try {
    await pool.query('select 1');
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new StoreOpenError(`${SETTING} "${redact(url)}" cannot be opened: ${reason(error)}`, {
      cause: error,
    });
  }
  const isServerError = (error: unknown) => error instanceof pg.DatabaseError;
  const db = new Kysely<Database>({
    dialect: new SchemaScopedPostgresDialect({
      pool: discardingBrokenClients(
        pool,
        isServerError,
        prepare ? warnedStatementNames() : undefined,
      ),
    }),
  });
  return withClose(db, 'postgres', async () => {
    // Kysely ends the pool only if it ever ran a query.
    if (!pool.ended) await pool.end();
  });
}

/** The open database with an idempotent `close` that destroys Kysely, then runs `after`. */
function withClose(
  db: Kysely<Database>,
  dialect: SqlDialect,
  after: () => void | Promise<void>,
): OpenDatabase {
  let closing: Promise<void> | undefined;
  const close = async () => {
    await db.destroy();
    await after();
  };
  return { db, dialect, close: () => (closing ??= close()) };
}

/**
 * Loads an optional driver package, or throws `StoreOpenError` with `missing` when it is not
 * installed (like terminus' `checkPackage`). Other load failures propagate unchanged.
 */
function loadOptional<T>(name: string, missing: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND' && reason(error).includes(`'${name}'`)) {
      throw new StoreOpenError(missing, { cause: error });
    }
    throw error;
  }
}

/** First line of an error's message: the errors of this file are one line. */
function reason(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0].trim();
}

/** The URL with its password masked, for error messages. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.password) return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
