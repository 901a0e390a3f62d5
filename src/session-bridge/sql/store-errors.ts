import { AgentError, StoreUnavailableError } from '../../contracts';

/** The stores of the SQL adapters, as `StoreUnavailableError.store` names them. */
export type SqlStoreName = 'sessions' | 'history' | 'archive' | 'inbox';

/**
 * Runs one adapter method's database work and turns whatever the driver throws (connection
 * refused or reset, a timeout, a pool error, a refused write) into a `StoreUnavailableError`
 * with the driver's error as `cause`, so callers see one error type whichever database and
 * driver is behind the port. The library's own errors pass unchanged: they are what the ports
 * promise (`SessionNotFoundError` from `SessionStore.update`, ...).
 */
export async function guarded<T>(
  store: SqlStoreName,
  operation: string,
  work: () => Promise<T>,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof AgentError) throw error;
    throw new StoreUnavailableError(store, operation, { cause: error });
  }
}
