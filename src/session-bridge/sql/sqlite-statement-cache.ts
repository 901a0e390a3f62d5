import type { SqliteDatabase, SqliteStatement } from 'kysely';

/** Prepared statements kept per connection: the stores use a few dozen distinct queries. */
export const STATEMENT_CACHE_SIZE = 256;

/**
 * A better-sqlite3 database for Kysely whose `prepare` reuses the statement of an SQL text it
 * prepared before (least recently used ones are let go past `size`). Kysely's SQLite driver
 * prepares every query anew, which cost more than running it: about a third of an accepted
 * input's time went to preparing the same few statements again. A statement is reset on every
 * run, so reuse is safe on this one synchronous connection; the stores never stream a query
 * (`iterate`), the only use that would hold a statement across awaits. @internal
 */
export class StatementCache implements SqliteDatabase {
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(
    private readonly database: SqliteDatabase,
    private readonly size = STATEMENT_CACHE_SIZE,
  ) {}

  prepare(sql: string): SqliteStatement {
    const known = this.statements.get(sql);
    if (known) {
      // Most recently used last: the first key is the one to let go.
      this.statements.delete(sql);
      this.statements.set(sql, known);
      return known;
    }
    const statement = this.database.prepare(sql);
    this.statements.set(sql, statement);
    if (this.statements.size > this.size) {
      this.statements.delete(this.statements.keys().next().value!);
    }
    return statement;
  }

  /** How many statements are kept. */
  get cached(): number {
    return this.statements.size;
  }

  close(): void {
    this.statements.clear();
    this.database.close();
  }
}
