import type { Pool, PoolClient } from 'pg';
import {
  discardingBrokenClients,
  postgresTimeouts,
  StatementNames,
} from '../../../../src/session-bridge/sql/postgres-pool';

/** A server-reported error, as the fake tells it apart. */
class ServerError extends Error {}

/** A pool with one client whose queries answer from `answers`, in order. */
function fakePool(answers: Array<Error | { rows: unknown[] }>) {
  const released: Array<boolean | Error | undefined> = [];
  const sent: string[] = [];
  const client = {
    query: jest.fn(async (config: string | { name: string; text: string }) => {
      sent.push(typeof config === 'string' ? config : `${config.name}: ${config.text}`);
      const answer = answers.shift();
      if (answer instanceof Error) throw answer;
      return answer;
    }),
    release: jest.fn((destroy?: boolean | Error) => released.push(destroy)),
  };
  const pool = {
    connect: async () => client as unknown as PoolClient,
    end: jest.fn(async () => undefined),
  } as unknown as Pool;
  return { pool, released, sent };
}

const isServerError = (error: unknown) => error instanceof ServerError;

describe('postgres pool', () => {
  it('postgresTimeouts: connect and query bounds at timeoutMs, the server a little before', () => {
    expect(postgresTimeouts(10_000)).toEqual({
      connectionTimeoutMillis: 10_000,
      statement_timeout: 9_000,
      query_timeout: 10_000,
    });
    expect(postgresTimeouts(1000)).toMatchObject({ statement_timeout: 800, query_timeout: 1000 });
    expect(postgresTimeouts(1).statement_timeout).toBe(1);
  });

  it('a client error breaks the client: later queries fail at once, release destroys it', async () => {
    const timeout = new Error('Query read timeout');
    const { pool, released, sent } = fakePool([timeout, { rows: [] }]);
    const client = await discardingBrokenClients(pool, isServerError).connect();

    await expect(client.query('select 1', [])).rejects.toBe(timeout);
    await expect(client.query('rollback', [])).rejects.toBe(timeout);
    client.release();

    expect(sent).toEqual(['select 1']);
    expect(released).toEqual([true]);
  });

  it('a pooled client comes back as the same wrapper (one Kysely connection object each); a destroyed one as a new, healthy wrapper', async () => {
    const timeout = new Error('Query read timeout');
    const { pool, released, sent } = fakePool([{ rows: [1] }, timeout, { rows: [2] }]);
    const wrapped = discardingBrokenClients(pool, isServerError);

    const first = await wrapped.connect();
    await expect(first.query('select 1', [])).resolves.toEqual({ rows: [1] });
    first.release();
    const again = await wrapped.connect();
    expect(again).toBe(first);
    await expect(again.query('select 2', [])).rejects.toBe(timeout);
    again.release();
    // The fake pool hands out the destroyed client object again: its state is not carried over.
    const fresh = await wrapped.connect();
    expect(fresh).not.toBe(first);
    await expect(fresh.query('select 3', [])).resolves.toEqual({ rows: [2] });
    fresh.release();

    expect(sent).toEqual(['select 1', 'select 2', 'select 3']);
    expect(released).toEqual([false, true, false]);
  });

  it('a server error leaves the client healthy: it goes back to the pool', async () => {
    const { pool, released } = fakePool([new ServerError('undefined_table'), { rows: [1] }]);
    const client = await discardingBrokenClients(pool, isServerError).connect();

    await expect(client.query('select * from gone', [])).rejects.toBeInstanceOf(ServerError);
    await expect(client.query('select 1', [])).resolves.toEqual({ rows: [1] });
    client.release();

    expect(released).toEqual([false]);
  });

  it('release(true) from Kysely (a failed rollback) still destroys; end ends the pool', async () => {
    const { pool, released } = fakePool([]);
    const wrapped = discardingBrokenClients(pool, isServerError);
    (await wrapped.connect()).release(true);
    await wrapped.end();

    expect(released).toEqual([true]);
    expect(pool.end).toHaveBeenCalledTimes(1);
  });

  it('names each distinct statement with parameters once, up to the cap; the rest run unnamed', async () => {
    const { pool, sent } = fakePool(Array.from({ length: 6 }, () => ({ rows: [] })));
    const client = await discardingBrokenClients(
      pool,
      isServerError,
      new StatementNames(2),
    ).connect();

    await client.query('select $1', [1]);
    await client.query('select $1', [2]);
    await client.query('begin', []);
    await client.query('select $1, $2', [1, 2]);
    await client.query('select $1, $2, $3', [1, 2, 3]);
    await client.query('select $1', [3]);

    expect(sent).toEqual([
      'agent_0: select $1',
      'agent_0: select $1',
      'begin',
      'agent_1: select $1, $2',
      'select $1, $2, $3',
      'agent_0: select $1',
    ]);
  });

  it('a stale prepared statement runs again unnamed outside a transaction, fails inside one; either way its client is destroyed on release', async () => {
    const stale = Object.assign(new ServerError('cached plan must not change result type'), {
      code: '0A000',
    });
    const { pool, released, sent } = fakePool([
      stale,
      { rows: [1] },
      { rows: [] },
      stale,
      { rows: [] },
    ]);
    const client = await discardingBrokenClients(
      pool,
      isServerError,
      new StatementNames(),
    ).connect();

    await expect(client.query('select * from t where a = $1', [1])).resolves.toEqual({ rows: [1] });
    await client.query('begin', []);
    await expect(client.query('select * from t where a = $1', [1])).rejects.toBe(stale);
    await client.query('rollback', []);
    client.release();

    expect(sent).toEqual([
      'agent_0: select * from t where a = $1',
      'select * from t where a = $1',
      'begin',
      'agent_0: select * from t where a = $1',
      'rollback',
    ]);
    expect(released).toEqual([true]);
  });

  it('a lost prepared statement turns naming off for the pool, telling onLost once; inside a transaction it fails, outside it runs again unnamed', async () => {
    const lost = Object.assign(new ServerError('prepared statement does not exist'), {
      code: '26000',
    });
    const { pool, released, sent } = fakePool([
      { rows: [] },
      lost,
      { rows: [] },
      { rows: [2] },
      { rows: [3] },
    ]);
    const onLost = jest.fn();
    const names = new StatementNames(256, onLost);
    const client = await discardingBrokenClients(pool, isServerError, names).connect();

    await client.query('begin', []);
    await expect(client.query('select $1', [1])).rejects.toBe(lost);
    await client.query('rollback', []);
    await expect(client.query('select $1, $2', [1, 2])).resolves.toEqual({ rows: [2] });
    await expect(client.query('select $1', [1])).resolves.toEqual({ rows: [3] });
    client.release();

    expect(sent).toEqual(['begin', 'agent_0: select $1', 'rollback', 'select $1, $2', 'select $1']);
    expect(onLost).toHaveBeenCalledTimes(1);
    expect(onLost).toHaveBeenCalledWith('26000');
    expect(released).toEqual([false]);
  });
});
