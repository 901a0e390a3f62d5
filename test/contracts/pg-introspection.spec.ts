import { CurrentSchemaIntrospector } from '../../src/session-bridge/sql/postgres-introspector';
import { openDatabase } from '../../src/session-bridge';
import { createSqlStores } from '../../src';
import { describePg, tempPgSchema, type TempDb } from './sql-test-db';

// Twelve migrations against a churning server: seconds on a loaded CI machine, not 5.
jest.setTimeout(60_000);

/**
 * Kysely's migrator asks its introspector which tables exist. Scoped to the connection's own
 * schema, it neither sees another schema's migration tables nor reads schemas that another
 * process may be dropping at that moment (the stock one fails then with "schema ... does not
 * exist").
 */
describePg('PostgreSQL introspection for migrations', () => {
  const schemas: TempDb[] = [];
  afterEach(async () => {
    for (const schema of schemas.splice(0)) await schema.drop();
  });

  it('sees only the tables of the connection schema, not those of another migrated schema', async () => {
    const migrated = await tempPgSchema();
    const empty = await tempPgSchema();
    schemas.push(migrated, empty);
    await (await createSqlStores(migrated.url)).close();
    const opened = await openDatabase(empty.url);
    try {
      const introspector = new CurrentSchemaIntrospector(opened.db);
      expect(await introspector.getTables()).toEqual([]);
      expect(opened.db.introspection).toBeInstanceOf(CurrentSchemaIntrospector);
    } finally {
      await opened.close();
    }
    const own = await openDatabase(migrated.url);
    try {
      const names = (await own.db.introspection.getTables()).map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['inbox', 'kysely_migration', 'messages']));
    } finally {
      await own.close();
    }
  });

  it('migrates while other schemas are created and dropped all the while', async () => {
    let churning = true;
    // Three loops, each making a schema and dropping it again.
    const churn = Array.from({ length: 3 }, async () => {
      while (churning) {
        const other = await tempPgSchema();
        await other.drop();
      }
    });
    try {
      for (let i = 0; i < 12; i++) {
        const schema = await tempPgSchema();
        schemas.push(schema);
        await (await createSqlStores(schema.url)).close();
      }
    } finally {
      churning = false;
      await Promise.all(churn);
    }
  });
});
