import { createSqlStores, type SqlStores } from '../../src';
import { describeHistoryContract, type ContractPorts } from './store-contract';
import { describePg, tempPgSchema } from './sql-test-db';

/** The contract's ports of one set of SQL stores; one log serves both history ports. */
const ports = (stores: SqlStores): ContractPorts => ({
  history: stores.log,
  archive: stores.log,
  sessions: stores.sessions,
  inbox: stores.inbox,
});

// A schema of its own per test (the contract's clear() empties every session), dropped in cleanup.
describePg('postgres', () => {
  describeHistoryContract(
    'postgres',
    async () => {
      const schema = await tempPgSchema();
      let stores = await createSqlStores(schema.url).catch(async (error: unknown) => {
        await schema.drop();
        throw error;
      });
      return {
        ...ports(stores),
        // A restart: the pool ended, then new stores on the same schema.
        restart: async () => {
          await stores.close();
          stores = await createSqlStores(schema.url);
          return ports(stores);
        },
        cleanup: () => stores.close().finally(() => schema.drop()),
      };
    },
    { durable: true },
  );
});
