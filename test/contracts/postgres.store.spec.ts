import { createSqlStores } from '../../src';
import { describeHistoryContract } from './store-contract';
import { describePg, tempPgSchema } from './sql-test-db';

// A schema of its own per test (the contract's clear() empties every session), dropped in cleanup.
describePg('postgres', () => {
  describeHistoryContract('postgres', async () => {
    const schema = await tempPgSchema();
    const stores = await createSqlStores(schema.url).catch(async (error: unknown) => {
      await schema.drop();
      throw error;
    });
    return {
      history: stores.log,
      archive: stores.log,
      sessions: stores.sessions,
      cleanup: () => stores.close().finally(() => schema.drop()),
    };
  });
});
