/**
 * `fetch` whose failures are always `Error` instances. Node's `fetch` rejects with errors of its
 * own realm (a `DOMException` on abort, a `TypeError` on network failure); where those are not
 * `instanceof Error` of the caller's realm (test sandboxes, for instance), the SDKs would turn
 * them into an empty `Error('{}')` and lose that a timeout was a timeout.
 */
export async function safeFetch(
  input: string | URL | Request,
  init?: RequestInit,
): Promise<Response> {
  try {
    return await fetch(input, init);
  } catch (error) {
    throw asError(error);
  }
}

/** A `fetch`: the global one, or one a host passes in (a proxy agent, a test double). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** {@link safeFetch} over another `fetch` implementation. */
export function safeFetchOf(impl: FetchLike): FetchLike {
  return async (input, init) => {
    try {
      return await impl(input, init);
    } catch (error) {
      throw asError(error);
    }
  };
}

/** `error` itself when it is an `Error`, else an `Error` with its name, message and code. */
export function asError(error: unknown): unknown {
  if (error instanceof Error || typeof error !== 'object' || error === null) return error;
  const source = error as { name?: unknown; message?: unknown; code?: unknown };
  const copy = new Error(typeof source.message === 'string' ? source.message : 'fetch failed', {
    cause: error,
  });
  if (typeof source.name === 'string') copy.name = source.name;
  if (source.code !== undefined) (copy as Error & { code?: unknown }).code = source.code;
  return copy;
}
