/**
 * The one text policy of every store (and of what the model sees): text is kept as given except
 * for the code units no store can hold the same way. PostgreSQL refuses U+0000 in text, and a
 * lone surrogate is not UTF-8 at all (drivers turn it into U+FFFD on their own, or not), so
 * without one rule the memory, SQLite and PostgreSQL stores would each return different text.
 */

/**
 * U+0000, a high surrogate not followed by a low one, or a low surrogate not preceded by a high
 * one. No `u` flag on purpose: the pattern must see UTF-16 code units, not code points.
 */
// eslint-disable-next-line no-control-regex -- U+0000 is exactly what the policy looks for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** `String.prototype.isWellFormed` (ES2024, in every Node this package runs on). */
type WellFormedCheck = (this: string) => boolean;
const isWellFormed = (String.prototype as unknown as { isWellFormed: WellFormedCheck })
  .isWellFormed;

/**
 * Whether `text` holds nothing `UNSTORABLE` matches: no U+0000 and no lone surrogate (what
 * `isWellFormed` checks, natively: a quarter of the regex's time on the short texts of a turn).
 */
function storable(text: string): boolean {
  return isWellFormed.call(text) && !text.includes('\u0000');
}

/**
 * `text` as every store keeps it: U+0000 becomes U+FFFD, and so does every lone surrogate code
 * unit (one U+FFFD each); valid surrogate pairs and everything else are unchanged. Returns
 * `text` itself when nothing needs changing (one native check, no copy).
 */
export function normaliseText(text: string): string {
  return storable(text) ? text : text.replace(UNSTORABLE_ALL, '\uFFFD');
}

/**
 * `value` with `normaliseText` applied to every string inside plain objects and arrays, keys
 * included (two keys that normalise to the same key: the later one wins). Other objects (dates,
 * class instances, ...) are kept as they are, and so is a reference back to an object being
 * walked (a cycle is not followed). Copies only what changes: an unchanged value is returned
 * itself.
 */
export function normaliseDeep<T>(value: T): T {
  // Nearly everything is clean: find that out without allocating, copy only when not.
  if (isClean(value, 0)) return value;
  return walk(value, new Set()) as T;
}

/** Deeper than this, `isClean` leaves the answer to `walk` (which handles cycles). */
const CLEAN_SCAN_DEPTH = 32;

/** Whether no string in `value` (keys included) needs `normaliseText`; no allocation. */
function isClean(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return storable(value);
  if (typeof value !== 'object' || value === null) return true;
  if (depth > CLEAN_SCAN_DEPTH) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (!isClean(item, depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return true;
  for (const key in value) {
    if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
    if (!storable(key) || !isClean((value as Record<string, unknown>)[key], depth + 1)) {
      return false;
    }
  }
  return true;
}

function walk(value: unknown, ancestors: Set<object>): unknown {
  if (typeof value === 'string') return normaliseText(value);
  if (typeof value !== 'object' || value === null || ancestors.has(value)) return value;
  if (Array.isArray(value)) {
    ancestors.add(value);
    const items = value.map((item) => walk(item, ancestors));
    ancestors.delete(value);
    return items.some((item, i) => item !== value[i]) ? items : value;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  ancestors.add(value);
  let changed = false;
  const entries = Object.entries(value).map(([key, item]) => {
    const pair = [normaliseText(key), walk(item, ancestors)] as const;
    changed ||= pair[0] !== key || pair[1] !== item;
    return pair;
  });
  ancestors.delete(value);
  if (!changed) return value;
  const copy: Record<string, unknown> = proto === null ? Object.create(null) : {};
  for (const [key, item] of entries) copy[key] = item;
  return copy;
}
