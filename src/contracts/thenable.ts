/**
 * Whether `value` is a promise or another thenable: what a callback that may answer either at
 * once or later (a tool handler, a contribution's build) returned. A plain value is already
 * there, so it needs no timeout racing it.
 * @internal
 */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
