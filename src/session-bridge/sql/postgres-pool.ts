import { Logger } from '@nestjs/common';
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import type { Pool, PoolClient, PoolConfig, Query, QueryResult } from 'pg';

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

/** At most this many distinct statement texts get a name (are prepared) per pool. */
export const MAX_PREPARED_STATEMENTS = 256;

/**
 * The names of a pool's prepared statements: one per distinct statement text, for the first
 * `max` texts (the hot path's few dozen shapes come first; later ones, such as rare list
 * lengths, run unnamed), so neither the server's memory per connection nor the `pg` client's
 * cache grows without bound.
 */
export class StatementNames {
  private readonly names = new Map<string, string>();
  private off = false;

  /** `onLost`: told once, with the SQLSTATE, when `lost` turns the naming off. */
  constructor(
    private readonly max = MAX_PREPARED_STATEMENTS,
    private readonly onLost?: (code: string) => void,
  ) {}

  /** The name of `text`, or none when the cap is reached or the naming is off. */
  nameOf(text: string): string | undefined {
    if (this.off) return undefined;
    let name = this.names.get(text);
    if (name === undefined && this.names.size < this.max) {
      name = `agent_${this.names.size}`;
      this.names.set(text, name);
    }
    return name;
  }

  /**
   * The server lost a prepared statement, or had one of the name already: a pooler between
   * (PgBouncer in transaction mode before 1.21 or without `max_prepared_statements`) hands each
   * transaction another server connection. From now on every statement of the pool runs unnamed.
   */
  lost(code: string): void {
    if (this.off) return;
    this.off = true;
    this.onLost?.(code);
  }
}

/** A pool's statement names; a pooler that loses them turns them off with one warning. */
export function warnedStatementNames(): StatementNames {
  return new StatementNames(MAX_PREPARED_STATEMENTS, (code) =>
    new Logger('SqlStores').warn(
      `PostgreSQL lost a prepared statement of the stores (SQLSTATE ${code}): a pooler between ` +
        'them and the database does not keep prepared statements, so they now run unprepared. ' +
        "Set AGENT_DB_PREPARE=false (or the stores' prepare: false) to start that way.",
    ),
  );
}

/**
 * SQLSTATEs of a named statement refused before it ran:
 * - `26000` (the server does not have it) and `42P05` (the server has that name already): a
 *   pooler switched server connections under the client (`StatementNames.lost`);
 * - `0A000`: its result columns changed since it was prepared (a newer version's migration
 *   altered a table under a running instance: `cached plan must not change result type`, on that
 *   connection, every time). Told by the code alone (the message may be translated); another
 *   `0A000` fails again when run unnamed.
 */
const LOST_STATEMENT = new Set(['26000', '42P05']);
const STALE_PLAN = '0A000';

/**
 * `pool` as Kysely's `PostgresPool`, except that:
 * - a client whose query failed for any reason but an error reported by the server (a
 *   client-side timeout, a reset or closed connection) is destroyed on release instead of going
 *   back to the pool. NOTE: after `query_timeout` the `pg` client still waits for the abandoned
 *   query's answer, so every later query on it (the transaction's rollback first) would queue
 *   behind it and time out again; once broken, its queries therefore fail at once with the first
 *   error;
 * - with `names`, each statement with parameters runs as a named prepared statement (parsed
 *   and planned once per connection). One that went stale is run again unnamed when no
 *   transaction is open (it failed before it did anything) and its client is destroyed on
 *   release, so the next one prepares the statements afresh. One the server lost (a pooler
 *   between) is run again unnamed the same way, and the pool's statements run unnamed from
 *   then on (`StatementNames.lost`).
 */
export function discardingBrokenClients(
  pool: Pool,
  isServerError: (error: unknown) => boolean,
  names?: StatementNames,
): PostgresPool {
  // One wrapper per pooled connection, kept while it lives: Kysely keeps its own connection
  // object per client object it is given, so a new wrapper on every acquire (every statement
  // outside a transaction) would make it build a new one each time as well.
  const wrappers = new WeakMap<PoolClient, PostgresPoolClient>();
  const forget = (client: PoolClient) => wrappers.delete(client);
  return {
    connect: async () => {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (wrapper === undefined) {
        wrapper = wrap(client, isServerError, names, forget);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/**
 * Runs `text` as the prepared statement `name`. Through `pg`'s own `Query` (its client class
 * carries it) built from the text: `client.query({ name, text, values })` would copy the config
 * object property by property on every call (`cloneQueryConfig`: 2.5-3.3 % of the samples in
 * a profile of PostgreSQL turns). A client without that class (a stand-in) gets the config object.
 */
function runNamed(
  client: PoolClient,
  name: string,
  text: string,
  values: unknown[],
): Promise<QueryResult> {
  const Submittable = (client.constructor as { Query?: typeof Query } | undefined)?.Query;
  if (Submittable === undefined) return client.query({ name, text, values });
  return new Promise((resolve, reject) => {
    const query = new Submittable(text, values, (error, result) =>
      error ? reject(error) : resolve(result),
    ) as Query & { name?: string };
    query.name = name;
    client.query(query);
  });
}

function wrap(
  client: PoolClient,
  isServerError: (error: unknown) => boolean,
  names: StatementNames | undefined,
  /** Told when the client is destroyed: its wrapper is not to be handed out again. */
  destroyed: (client: PoolClient) => void,
): PostgresPoolClient {
  let broken = false;
  let failure: unknown;
  let stale = false;
  let inTransaction = false;
  const run = async (text: string, values: unknown[]) => {
    // Statements without parameters (transaction control, migrations) go as plain text.
    const name = values.length > 0 ? names?.nameOf(text) : undefined;
    if (name === undefined) return client.query(text, values);
    try {
      return await runNamed(client, name, text, values);
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (typeof code === 'string' && LOST_STATEMENT.has(code)) names!.lost(code);
      else if (code === STALE_PLAN) stale = true;
      else throw error;
      if (inTransaction) throw error;
      return client.query(text, values);
    }
  };
  const query = async (text: string, parameters: readonly unknown[]) => {
    if (broken) throw failure;
    // Kysely opens and ends its transactions with these statements.
    if (text === 'begin' || text.startsWith('start transaction')) inTransaction = true;
    else if (text === 'commit' || text === 'rollback') inTransaction = false;
    try {
      // Kysely's parameter lists are frozen; `pg` only reads them.
      return await run(text, parameters as unknown[]);
    } catch (error) {
      if (!isServerError(error)) [broken, failure] = [true, error];
      throw error;
    }
  };
  return {
    // Kysely queries with (sql, parameters) only: this library configures no cursor.
    query: query as unknown as PostgresPoolClient['query'],
    release: (destroy?: boolean) => {
      const destroying = Boolean(destroy) || broken || stale;
      if (destroying) destroyed(client);
      client.release(destroying);
    },
  };
}
