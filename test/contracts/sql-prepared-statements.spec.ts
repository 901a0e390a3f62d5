import { Logger } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import { createSqlStores } from '../../src';
import { openDatabase, type Database, type OpenDatabase } from '../../src/session-bridge';
import { describePg, tempPgSchema, type TempDb } from './sql-test-db';

/**
 * The PostgreSQL stores run their statements as named prepared statements (`prepare`, on by
 * default): parsed and planned once per connection. A statement prepared before a newer
 * version's migration changed its table's columns is refused by the server on that connection
 * from then on; the stores run it again unnamed and replace the connection.
 */

/** One session's messages, all columns: a prepared `select *`. */
function readAll(db: Kysely<Database>, sessionId: string) {
  return db.selectFrom('messages').selectAll().where('session_id', '=', sessionId).execute();
}

async function backendPid(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  return rows[0].pid;
}

/** The names of the prepared statements of the connection the next query gets. */
async function preparedNames(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{
    name: string;
  }>`select name from pg_prepared_statements order by name`.execute(db);
  return rows.map((row) => row.name);
}

describePg('SQL stores on PostgreSQL: prepared statements', () => {
  let temp: TempDb;
  const opened: OpenDatabase[] = [];
  const open = async (prepare?: boolean) => {
    const database = await openDatabase(temp.url, prepare === undefined ? {} : { prepare });
    opened.push(database);
    return database.db;
  };

  beforeEach(async () => {
    temp = await tempPgSchema();
    await (await createSqlStores(temp.url)).close(); // the schema, migrated
  });
  afterEach(async () => {
    for (const database of opened.splice(0)) await database.close();
    await temp.drop();
  });

  it('statements with parameters are prepared once per connection by default, and not with prepare: false', async () => {
    // Queries one after another share one pooled connection.
    const db = await open();
    for (let i = 0; i < 3; i++) await readAll(db, 's');
    const names = await preparedNames(db);
    expect(names.length).toBeGreaterThan(0);
    expect(names.every((name) => /^agent_\d+$/.test(name))).toBe(true);
    const { rows } = await sql<{
      n: number;
    }>`select count(*)::int as n from pg_prepared_statements where statement like 'select * from "messages"%'`.execute(
      db,
    );
    expect(rows[0].n).toBe(1);

    const plain = await open(false);
    for (let i = 0; i < 3; i++) await readAll(plain, 's');
    expect(await preparedNames(plain)).toEqual([]);
  });

  it('a statement gone stale under a migration runs again unnamed, outside a transaction; its connection is replaced', async () => {
    const db = await open();
    const other = await open();
    await sql`insert into messages (id, session_id, role, content, metadata, created_at)
      values ('m1', 's', 'user', 'hi', '{}', '2026-01-01T00:00:00.000Z')`.execute(other);
    expect(await readAll(db, 's')).toHaveLength(1);
    const before = await backendPid(db);

    await sql`alter table messages add column extra text`.execute(other);
    const [row] = await readAll(db, 's');
    expect(row).toMatchObject({ id: 'm1', extra: null });
    expect(await backendPid(db)).not.toBe(before);
    // The new connection prepares it afresh.
    expect(await readAll(db, 's')).toHaveLength(1);

    // Inside a transaction it cannot run again (the transaction is aborted): it fails once.
    await sql`alter table messages add column more text`.execute(other);
    const inTransaction = db.transaction().execute((trx) => readAll(trx, 's'));
    await expect(inTransaction).rejects.toMatchObject({ code: '0A000' });
    const [after] = await readAll(db, 's');
    expect(after).toMatchObject({ id: 'm1', extra: null, more: null });
  });

  it.each([
    ['26000', 'deallocate all'],
    ['42P05', 'prepare agent_0 as select 1'],
  ])(
    'a statement the server lost or already names (SQLSTATE %s, as behind a pooler) runs again unnamed, and the pool stops naming with one warning',
    async (code, before) => {
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        const db = await open();
        if (code === '26000') await readAll(db, 's'); // prepared as agent_0, then lost
        await sql.raw(before).execute(db);
        expect(await readAll(db, 's')).toEqual([]);
        for (let i = 0; i < 3; i++) await readAll(db, 's');
        const names = await preparedNames(db);
        expect(names).toEqual(code === '42P05' ? ['agent_0'] : []);
        expect(warn).toHaveBeenCalledTimes(1);
        expect(String(warn.mock.calls[0][0])).toContain(`SQLSTATE ${code}`);
        expect(String(warn.mock.calls[0][0])).toContain('AGENT_DB_PREPARE=false');
      } finally {
        warn.mockRestore();
      }
    },
  );
});
