import { WellKnownMetadataKeys, type Message, type NewMessage } from '../../contracts';

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

/** What a shared metadata value may hold: a count, or a short text. */
type Field = 'count' | 'text';
/**
 * Metadata values the engine writes on nearly every message, the same again and again, holding
 * no words of the user's (kept after a session is deleted, they must not): token counts, the
 * model reference, a turn record that is only an outcome (and source).
 */
const SHARED = new Map<string, { field: Field; keys?: ReadonlySet<string> }>([
  [WellKnownMetadataKeys.TokenCount, { field: 'count' }],
  [WellKnownMetadataKeys.Model, { field: 'text' }],
  [WellKnownMetadataKeys.TurnRecord, { field: 'text', keys: new Set(['outcome', 'source']) }],
]);
/** Shared frozen metadata values, by key and fields. */
const shared = new Map<string, object>();
/** Most shared values kept (they repeat: a few thousand cover nearly all). */
const MAX_SHARED = 4_096;
/** Most fields of a shared value. */
const MAX_SHARED_FIELDS = 4;
/** Longest text field of a shared value. */
const MAX_SHARED_TEXT = 64;

/**
 * The key under which `value` (the metadata value under `key`) is shared, or `undefined` when it
 * is not one `SHARED` names: too many fields, a field of another kind, an unexpected key.
 */
function sharedKey(key: string, value: object): string | undefined {
  const rule = SHARED.get(key);
  if (!rule || !isPlain(value)) return undefined;
  let id = key;
  let fields = 0;
  for (const name in value) {
    const field = (value as Record<string, unknown>)[name];
    if (++fields > MAX_SHARED_FIELDS || (rule.keys && !rule.keys.has(name))) return undefined;
    if (rule.field === 'count') {
      if (typeof field !== 'number' || !Number.isSafeInteger(field)) return undefined;
    } else if (typeof field !== 'string' || field.length > MAX_SHARED_TEXT) return undefined;
    id += `\u0000${name}\u0001${field}`;
  }
  return id;
}

/**
 * A frozen copy of the metadata value under `key`: for the values `SHARED` names, one shared
 * frozen object per distinct value, so that a thousand messages do not keep a thousand copies.
 */
function frozenValue(key: string, value: unknown): unknown {
  const id = typeof value === 'object' && value !== null ? sharedKey(key, value) : undefined;
  if (id === undefined) return frozenCopy(value);
  let found = shared.get(id);
  if (!found) {
    found = frozenCopy(value as object);
    if (shared.size < MAX_SHARED) shared.set(id, found);
  }
  return found;
}

/**
 * The memory log's record of a new message: a deep frozen copy with its id and time, built as one
 * object literal (its fields kept in the object itself, no separate property store), the token
 * metadata values that repeat shared (`frozenValue`).
 */
export function frozenMessage(input: NewMessage, id: string, createdAt: string): Message {
  const metadata: Record<string, unknown> = {};
  const given = input.metadata ?? {};
  for (const key of Object.keys(given)) metadata[key] = frozenValue(key, given[key]);
  const message: Message = {
    id,
    sessionId: input.sessionId,
    role: input.role,
    content: input.content,
    metadata: Object.freeze(metadata),
    createdAt,
  };
  // The other fields as given (`hasOwn`: a field named like an Object.prototype member is one).
  for (const key of Object.keys(input) as (keyof NewMessage)[]) {
    if (!Object.hasOwn(message, key)) {
      (message as unknown as Record<string, unknown>)[key] = frozenCopy(input[key]);
    }
  }
  return Object.freeze(message);
}
