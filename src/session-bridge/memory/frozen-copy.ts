/**
 * A deep copy of `value`: plain objects and arrays are copied by hand (much cheaper than
 * `structuredClone` for the small trees messages and settings are); anything else a caller put
 * in (a `Date`, a `Map`, ...) is copied with `structuredClone`. With `freeze`, every copied
 * object is frozen (a non-plain one at its top).
 */
function deepCopy<T>(value: T, freeze: boolean): T {
  if (typeof value !== 'object' || value === null) return value;
  let copy: object;
  if (Array.isArray(value)) copy = value.map((item: unknown) => deepCopy(item, freeze));
  else if (isPlain(value)) {
    const fields: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      fields[key] = deepCopy((value as Record<string, unknown>)[key], freeze);
    }
    copy = fields;
  } else copy = structuredClone(value);
  return (freeze ? Object.freeze(copy) : copy) as T;
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A deep copy of `value`, frozen throughout: what the memory stores keep. */
export function frozenCopy<T>(value: T): T {
  return deepCopy(value, true);
}

/** A deep copy of `value` for a reader to own. */
export function plainCopy<T>(value: T): T {
  return deepCopy(value, false);
}
