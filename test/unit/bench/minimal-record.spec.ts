import { Pool } from 'pg';
import { createSqlStores, type SqlStores } from '../../../src';
import { minimalRecord } from '../../../bench/distributed-child';
import { describePg, tempPgSchema, type TempDb } from '../../contracts/sql-test-db';

/**
 * The floor of the distributed bench's throughput section (issue 17) writes an input's minimal
 * durable record with plain statements. It is a floor only if what it writes is that record:
 * what this project's own stores read back as a settled input and its two history messages.
 */
describePg("the distributed bench's minimal durable record", () => {
  let db: TempDb;
  let stores: SqlStores;
  let pool: Pool;

  beforeAll(async () => {
    db = await tempPgSchema();
    stores = await createSqlStores(db.url);
    pool = new Pool({ connectionString: db.url });
  });

  afterAll(async () => {
    await pool.end();
    await stores.close();
    await db.drop();
  });

  it('is what the stores read as a settled input with the input and its reply in the history', async () => {
    await minimalRecord(pool, { id: 'job-1', data: { sessionId: 'floor-s' } });

    const entry = await stores.inbox.get('job-1');
    expect(entry).toMatchObject({
      id: 'job-1',
      sessionId: 'floor-s',
      message: { id: 'job-1', sessionId: 'floor-s', content: 'question' },
      settlement: { settled: 'turn', outcome: 'replied' },
    });
    expect(await stores.inbox.unsettled('floor-s')).toEqual([]);
    const history = await stores.log.history('floor-s');
    expect(history.map(({ role, content }) => ({ role, content }))).toEqual([
      { role: 'user', content: 'question' },
      { role: 'assistant', content: 'answer' },
    ]);
    expect(await stores.log.count('floor-s')).toBe(2);
  });
});
