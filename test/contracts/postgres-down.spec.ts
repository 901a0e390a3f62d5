import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { createSqlStores, type SqlStores } from '../../src';
import { PgInstance, describeOwnPg } from './pg-instance';
import { everyStoreCall, expectUnavailable, msg } from './sql-test-db';

/**
 * PostgreSQL going away under open stores, on a server of the suite's own (the shared
 * `TEST_PG_URL` server is never stopped): every store call fails within `timeoutMs` with
 * `StoreUnavailableError` naming its store, and the stores work again once the server is back.
 */

const TIMEOUT_MS = 1000;
/** Scheduling slack on top of the timeout (CI machines are slow). */
const SLACK_MS = 1000;

describeOwnPg('SQL stores: PostgreSQL down, frozen and locked', () => {
  let server: PgInstance | undefined;
  let stores: SqlStores | undefined;
  let sid: string;

  beforeAll(async () => {
    server = await PgInstance.create();
    stores = await createSqlStores(server.url, { timeoutMs: TIMEOUT_MS });
  }, 60_000);

  afterAll(async () => {
    // Thaw and restart whatever a failed test left stopped or frozen, so close() returns.
    server?.thaw();
    await stores?.close();
    await server?.remove();
  }, 60_000);

  beforeEach(async () => {
    sid = `s-${randomUUID()}`;
    await stores!.sessions.ensure(sid);
    await stores!.log.append([msg(sid, 'before')]);
  });

  /**
   * Store calls one after the other, each expected to fail; their durations. `onePerStore`: the
   * first call of each store only (each waits out the timeout when the server is frozen).
   */
  async function callsFail(onePerStore = false): Promise<number[]> {
    const durations: number[] = [];
    const seen = new Set<string>();
    for (const [store, call] of everyStoreCall(stores!, sid)) {
      if (onePerStore && seen.has(store)) continue;
      seen.add(store);
      const { ms } = await expectUnavailable(call, store);
      durations.push(ms);
    }
    return durations;
  }

  /** The stores answer again, with what was written before the outage. */
  async function storesWork(): Promise<void> {
    expect(await stores!.sessions.get(sid)).toEqual({ sessionId: sid });
    await stores!.log.append([msg(sid, 'after')]);
    expect((await stores!.log.history(sid)).map((m) => m.content)).toEqual(['before', 'after']);
  }

  it('a stopped server: every call fails at once with StoreUnavailableError; a restart heals', async () => {
    await server!.stop();
    try {
      const durations = await callsFail();

      // Connection refused: nothing to wait for, so far below the timeout.
      expect(Math.max(...durations)).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      await server!.start();
    }
    await storesWork();
  }, 60_000);

  it('a frozen server: every call fails after about timeoutMs (query or connect timeout); thawed it heals', async () => {
    server!.freeze();
    try {
      const durations = await callsFail(true);

      // Nothing answers: each call waits out the client's timeout, and no longer.
      expect(Math.min(...durations)).toBeGreaterThanOrEqual(TIMEOUT_MS * 0.9);
      expect(Math.max(...durations)).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      server!.thaw();
    }
    await storesWork();
  }, 60_000);

  it('a table locked elsewhere: the server cancels the statement (statement_timeout) before timeoutMs', async () => {
    const locker = new Client({ connectionString: server!.url });
    await locker.connect();
    try {
      await locker.query('begin; lock table sessions in access exclusive mode');

      const { error, ms } = await expectUnavailable(() => stores!.sessions.get(sid), 'sessions');

      // 57014: query_canceled, the server's statement timeout.
      expect((error.cause as { code?: string }).code).toBe('57014');
      expect(ms).toBeLessThan(TIMEOUT_MS);
    } finally {
      await locker.query('rollback').finally(() => locker.end());
    }
    await storesWork();
  }, 60_000);
});
