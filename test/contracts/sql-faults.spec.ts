import { randomUUID } from 'node:crypto';
import Sqlite from 'better-sqlite3';
import { Client } from 'pg';
import { createSqlStores, SessionNotFoundError, type SqlStores } from '../../src';
import { openDatabase } from '../../src/session-bridge';
import {
  closeAll,
  describePg,
  everyStoreCall,
  expectOpenError,
  expectUnavailable,
  msg,
  PG_URL,
  tempPgSchema,
  tempSqlite,
  type TempDb,
} from './sql-test-db';

/**
 * A database that fails under an open store: every SQL adapter method rejects with
 * `StoreUnavailableError` naming its store (the driver's error as `cause`), and the errors the
 * ports promise stay as they are. The server going away or freezing: postgres-down.spec.ts.
 */

/** Drops every table of the stores behind their back: each statement is refused. */
const DROP_TABLES = [
  'messages',
  'message_counts',
  'sessions',
  'generations',
  'inbox',
  'inbox_counter',
]
  .map((table) => `drop table if exists ${table};`)
  .join(' ');

describe('SQL stores: faults on sqlite', () => {
  let file: TempDb;
  const open: SqlStores[] = [];

  beforeEach(() => {
    file = tempSqlite();
  });

  afterEach(async () => {
    await closeAll(open).finally(() => file.drop());
  });

  const stores = async (timeoutMs?: number) => {
    const created = await createSqlStores(file.url, { timeoutMs });
    open.push(created);
    return created;
  };

  it('a write lock held elsewhere: the write fails after busy_timeout (timeoutMs), then works', async () => {
    const mine = await stores(300);
    const sid = `s-${randomUUID()}`;
    const other = new Sqlite(file.url);
    try {
      other.exec('BEGIN IMMEDIATE');

      const { error, ms } = await expectUnavailable(() => mine.log.append([msg(sid)]), 'archive');

      expect((error.cause as { code?: string }).code).toBe('SQLITE_BUSY');
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(300 + 1000);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    await mine.log.append([msg(sid, 'after')]);
    expect(await mine.log.count(sid)).toBe(1);
  });

  it('refused statements (tables gone): every method names its store', async () => {
    const mine = await stores();
    const raw = new Sqlite(file.url);
    raw.exec(DROP_TABLES);
    raw.close();

    for (const [store, call] of everyStoreCall(mine, `s-${randomUUID()}`)) {
      const { error } = await expectUnavailable(call, store);
      expect(String(error.cause)).toMatch(/no such table/);
    }
  });

  it('a closed store: every method rejects with StoreUnavailableError', async () => {
    const mine = await createSqlStores(file.url);
    await mine.close();

    for (const [store, call] of everyStoreCall(mine, `s-${randomUUID()}`)) {
      await expectUnavailable(call, store);
    }
  });

  it('the errors the ports promise stay: update of missing settings is SessionNotFoundError', async () => {
    const mine = await stores();

    await expect(mine.sessions.update(`s-${randomUUID()}`, {})).rejects.toBeInstanceOf(
      SessionNotFoundError,
    );
  });

  it('timeoutMs must be a positive whole number: one StoreOpenError line otherwise', async () => {
    for (const timeoutMs of [0, -1, 1.5, Number.NaN, Infinity]) {
      await expectOpenError(openDatabase(file.url, { timeoutMs }), file.url, /timeoutMs/);
    }
    await expectOpenError(
      createSqlStores('postgres://u:secret@127.0.0.1:1/db', { timeoutMs: 0 }),
      '127.0.0.1:1',
      /timeoutMs must be a positive whole number of milliseconds, got 0/,
    );
  });
});

describePg('SQL stores: faults on postgres', () => {
  let schema: TempDb;
  const open: SqlStores[] = [];

  beforeEach(async () => {
    schema = await tempPgSchema();
  });

  afterEach(async () => {
    await closeAll(open).finally(() => schema.drop());
  });

  it('refused statements (tables gone): every method names its store', async () => {
    const mine = await createSqlStores(schema.url);
    open.push(mine);
    const admin = new Client({ connectionString: schema.url });
    await admin.connect();
    await admin.query(DROP_TABLES).finally(() => admin.end());

    for (const [store, call] of everyStoreCall(mine, `s-${randomUUID()}`)) {
      const { error } = await expectUnavailable(call, store);
      // 42P01: undefined_table, reported by the server.
      expect((error.cause as { code?: string }).code).toBe('42P01');
    }
  });

  it('a closed store: every method rejects with StoreUnavailableError', async () => {
    const mine = await createSqlStores(schema.url);
    await mine.close();

    for (const [store, call] of everyStoreCall(mine, `s-${randomUUID()}`)) {
      await expectUnavailable(call, store);
    }
  });

  it('the error message names the store, never the driver text or the URL', async () => {
    const mine = await createSqlStores(schema.url);
    await mine.close();

    const { error } = await expectUnavailable(() => mine.log.history('s'), 'history');

    expect(error.message).toBe('The history store is unavailable (read history)');
    expect(error.message).not.toContain(new URL(PG_URL).host);
  });
});
