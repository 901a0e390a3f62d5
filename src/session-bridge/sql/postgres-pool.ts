import type { PostgresPool, PostgresPoolClient } from 'kysely';
import type { Pool, PoolClient, PoolConfig } from 'pg';

/**
 * The `pg` pool settings that bound every wait on PostgreSQL by `timeoutMs`: connecting, waiting
 * for a pooled client, and a query. Two query bounds, on purpose: the server cancels a statement
 * itself a little before `timeoutMs` (`statement_timeout`: the connection stays usable), and the
 * client gives up at `timeoutMs` (`query_timeout`) for a server that no longer answers at all
 * (frozen, or the network gone), which no server-side setting can catch.
 */
export function postgresTimeouts(timeoutMs: number): PoolConfig {
  const margin = Math.min(1000, Math.floor(timeoutMs / 5));
  return {
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: Math.max(1, timeoutMs - margin),
    query_timeout: timeoutMs,
  };
}

/**
 * `pool` as Kysely's `PostgresPool`, except that a client whose query failed for any reason but
 * an error reported by the server (a client-side timeout, a reset or closed connection) is
 * destroyed on release instead of going back to the pool. NOTE: after `query_timeout` the `pg`
 * client still waits for the abandoned query's answer, so every later query on it (the
 * transaction's rollback first) would queue behind it and time out again; once broken, its
 * queries therefore fail at once with the first error.
 */
export function discardingBrokenClients(
  pool: Pool,
  isServerError: (error: unknown) => boolean,
): PostgresPool {
  return {
    connect: async () => wrap(await pool.connect(), isServerError),
    end: () => pool.end(),
  };
}

function wrap(client: PoolClient, isServerError: (error: unknown) => boolean): PostgresPoolClient {
  let broken = false;
  let failure: unknown;
  const query = async (text: string, parameters: readonly unknown[]) => {
    if (broken) throw failure;
    try {
      return await client.query(text, [...parameters]);
    } catch (error) {
      if (!isServerError(error)) [broken, failure] = [true, error];
      throw error;
    }
  };
  return {
    // Kysely queries with (sql, parameters) only: this library configures no cursor.
    query: query as unknown as PostgresPoolClient['query'],
    release: (destroy?: boolean) => client.release(Boolean(destroy) || broken),
  };
}
