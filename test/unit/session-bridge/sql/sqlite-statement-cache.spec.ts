import Database from 'better-sqlite3';
import { StatementCache } from '../../../../src/session-bridge/sql/sqlite-statement-cache';

describe('StatementCache (SQLite: a statement is prepared once per SQL text)', () => {
  let db: Database.Database;
  beforeEach(() => {
    db = new Database(':memory:');
    db.exec('create table t (id integer primary key, v text)');
  });
  afterEach(() => db.open && db.close());

  it('the same SQL gets the same prepared statement; it runs again with new parameters', () => {
    const cache = new StatementCache(db);
    const insert = cache.prepare('insert into t (v) values (?)');

    expect(cache.prepare('insert into t (v) values (?)')).toBe(insert);
    insert.run(['a']);
    cache.prepare('insert into t (v) values (?)').run(['b']);
    expect(cache.prepare('select v from t order by id').all([])).toEqual([{ v: 'a' }, { v: 'b' }]);
    expect(cache.cached).toBe(2);
  });

  it('keeps at most size statements, letting the least recently used go', () => {
    const cache = new StatementCache(db, 2);
    const one = cache.prepare('select 1');
    cache.prepare('select 2');
    cache.prepare('select 1'); // used again: now the most recent
    cache.prepare('select 3'); // lets "select 2" go

    expect(cache.cached).toBe(2);
    expect(cache.prepare('select 1')).toBe(one);
  });

  it('close forgets the statements and closes the database', () => {
    const cache = new StatementCache(db);
    cache.prepare('select 1');

    cache.close();

    expect(cache.cached).toBe(0);
    expect(db.open).toBe(false);
  });
});
