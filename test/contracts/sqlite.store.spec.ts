import { createSqlStores } from '../../src';
import { describeHistoryContract } from './store-contract';
import { tempSqlite } from './sql-test-db';

describeHistoryContract('sqlite', async () => {
  // A temp file per test, removed in cleanup; one store serves both history ports.
  const file = tempSqlite();
  const stores = await createSqlStores(file.url).catch(async (error: unknown) => {
    await file.drop();
    throw error;
  });
  return {
    history: stores.log,
    archive: stores.log,
    sessions: stores.sessions,
    cleanup: () => stores.close().finally(() => file.drop()),
  };
});
