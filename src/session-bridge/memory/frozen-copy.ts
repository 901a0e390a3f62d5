/**
 * A deep copy of `value`, frozen throughout: plain objects and arrays are copied by hand (much
 * cheaper than `structuredClone` for the small trees messages are); anything else a caller put
 * in metadata (a `Date`, a `Map`, ...) is copied with `structuredClone` and frozen at its top.
 */
export function frozenCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy)) as T;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return Object.freeze(structuredClone(value));
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    copy[key] = frozenCopy((value as Record<string, unknown>)[key]);
  }
  return Object.freeze(copy) as T;
}

/**
 * A deep copy of `value` for a reader: plain objects and arrays copied by hand, anything else
 * with `structuredClone` (as `frozenCopy`, without freezing).
 */
export function plainCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(plainCopy) as T;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    copy[key] = plainCopy((value as Record<string, unknown>)[key]);
  }
  return copy as T;
}
