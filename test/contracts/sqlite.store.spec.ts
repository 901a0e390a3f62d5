import { createSqlStores, type SqlStores } from '../../src';
import { describeHistoryContract, type ContractPorts } from './store-contract';
import { tempSqlite } from './sql-test-db';

/** The contract's ports of one set of SQL stores; one log serves both history ports. */
const ports = (stores: SqlStores): ContractPorts => ({
  history: stores.log,
  archive: stores.log,
  sessions: stores.sessions,
  inbox: stores.inbox,
});

describeHistoryContract(
  'sqlite',
  async () => {
    // A temp file per test, removed in cleanup.
    const file = tempSqlite();
    let stores = await createSqlStores(file.url).catch(async (error: unknown) => {
      await file.drop();
      throw error;
    });
    return {
      ...ports(stores),
      // A restart: the file closed, then opened again by new stores.
      restart: async () => {
        await stores.close();
        stores = await createSqlStores(file.url);
        return ports(stores);
      },
      cleanup: () => stores.close().finally(() => file.drop()),
    };
  },
  { durable: true },
);
