import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Migrator, sql } from 'kysely';
import { Client } from 'pg';
import { StoreOpenError, StoreUnavailableError, type NewMessage, type SqlStores } from '../../src';
import { InCodeMigrationProvider, type OpenDatabase } from '../../src/session-bridge';
import { describeNeeding } from '../support/describe-needing';

/**
 * Throwaway databases for the SQL store specs: a SQLite file in a temp directory, or a
 * PostgreSQL schema of its own. Both are removed by `drop()`.
 */

/** The test server: `TEST_PG_URL`, or the local trust-auth default. */
export const PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

let reachable: boolean | undefined;

/**
 * Whether the PostgreSQL test server answers. Synchronous (a child process), because jest
 * collects `describe` blocks synchronously and must know whether to skip them.
 */
export function pgReachable(): boolean {
  reachable ??=
    spawnSync(
      process.execPath,
      [
        '-e',
        `const { Client } = require(${JSON.stringify(require.resolve('pg'))});
         const c = new Client({ connectionString: process.argv[1], connectionTimeoutMillis: 3000 });
         c.connect().then(() => c.end()).then(() => process.exit(0), () => process.exit(1));`,
        PG_URL,
      ],
      { timeout: 5000 },
    ).status === 0;
  return reachable;
}

/**
 * `describe` for suites that need PostgreSQL. Unreachable server: outside CI the suite is
 * skipped with a title that says so; with `CI` set it fails (never a silent skip in CI).
 */
export function describePg(title: string, suite: () => void): void {
  describeNeeding(
    title,
    pgReachable() ? undefined : `PostgreSQL not reachable at ${PG_URL}`,
    'PostgreSQL is reachable',
    suite,
  );
}

/** A throwaway database: its `AGENT_DB` URL or path, and how to remove it. */
export interface TempDb {
  url: string;
  drop(): Promise<void>;
}

/** A fresh SQLite file path in a new temp directory (the file is created on open). */
export function tempSqlite(): TempDb {
  const dir = mkdtempSync(join(tmpdir(), 'agent-sqlite-'));
  return {
    url: join(dir, 'agent.sqlite'),
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Runs `sql` on the test server as its own short-lived connection. */
async function admin(sql: string): Promise<void> {
  const client = new Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A fresh schema `agent_test_<random>` and a URL whose connections use it (`search_path`). */
export async function tempPgSchema(): Promise<TempDb> {
  const schema = `agent_test_${randomBytes(6).toString('hex')}`;
  await admin(`create schema "${schema}"`);
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: () => admin(`drop schema if exists "${schema}" cascade`),
  };
}

/** Closes every store of `stores` (and forgets them). */
export const closeAll = async (stores: SqlStores[]) => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
};

/** Expects `promise` to reject with a one-line `StoreOpenError` naming AGENT_DB and `name`. */
export async function expectOpenError(promise: Promise<unknown>, name: string, says?: RegExp) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreOpenError);
  const message = (error as Error).message;
  expect(message).not.toContain('\n');
  expect(message).toContain('AGENT_DB');
  expect(message).toContain(name);
  if (says) expect(message).toMatch(says);
  return message;
}

/**
 * Awaits `call` and expects it to reject with a `StoreUnavailableError` naming `store`, with the
 * driver's error as `cause`; resolves with the error and how long the call took.
 */
export async function expectUnavailable(
  call: () => Promise<unknown>,
  store: string,
): Promise<{ error: StoreUnavailableError; ms: number }> {
  const started = performance.now();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  const ms = performance.now() - started;
  expect(error).toBeInstanceOf(StoreUnavailableError);
  const unavailable = error as StoreUnavailableError;
  expect(unavailable.store).toBe(store);
  expect(unavailable.message).toContain(`The ${store} store is unavailable`);
  expect(unavailable.cause).toBeDefined();
  return { error: unavailable, ms };
}

/** A plain user message of `sessionId`. */
export const msg = (sessionId: string, content = 'x'): NewMessage => ({
  sessionId,
  role: 'user',
  content,
  metadata: {},
});

/** One call of every SQL adapter method, with the store it must name. */
export function everyStoreCall(stores: SqlStores, sid: string) {
  return [
    ['sessions', () => stores.sessions.get(sid)],
    ['sessions', () => stores.sessions.ensure(sid)],
    ['sessions', () => stores.sessions.update(sid, { think: true })],
    ['sessions', () => stores.sessions.delete(sid)],
    ['sessions', () => stores.sessions.generationOf(sid)],
    ['sessions', () => stores.sessions.advanceGeneration(sid)],
    ['sessions', () => stores.sessions.list()],
    ['sessions', () => stores.sessions.listByActivity({ limit: 2 })],
    ['archive', () => stores.log.append([msg(sid)])],
    ['history', () => stores.log.history(sid, { limit: 2 })],
    ['history', () => stores.log.count(sid)],
    ['history', () => stores.log.clear(sid)],
    ['history', () => stores.log.rollbackTurn(sid, 't1')],
    ['history', () => stores.log.deleteSession(sid)],
    ['inbox', () => stores.inbox.accept({ id: `in-${sid}`, sessionId: sid, content: 'x' })],
    ['inbox', () => stores.inbox.enterTurn([`in-${sid}`], 't1')],
    ['inbox', () => stores.inbox.settle([`in-${sid}`], { settled: 'discarded' })],
    ['inbox', () => stores.inbox.get(`in-${sid}`)],
    ['inbox', () => stores.inbox.unsettled(sid)],
    ['inbox', () => stores.inbox.prune(new Date().toISOString())],
    ['inbox', () => stores.inbox.deleteSession(sid)],
  ] as const;
}

/**
 * Kysely's migrator over the in-code migrations, for a test that stops at an older version.
 * Pinned to the connection's schema on PostgreSQL, as `migrateToLatest` does: other tests'
 * schemas hold the same tables.
 */
export async function migratorOf(opened: OpenDatabase): Promise<Migrator> {
  const schema =
    opened.dialect === 'postgres'
      ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(opened.db))
          .rows[0].schema
      : undefined;
  return new Migrator({
    db: opened.db,
    provider: new InCodeMigrationProvider(opened.dialect),
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
}
