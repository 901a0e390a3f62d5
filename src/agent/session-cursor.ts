import type { SessionActivityKey, SessionListQuery, SessionState } from '../contracts';

/** Default and largest page of `AgentService.listSessions` (and `GET /agent/sessions`). */
export const SESSION_PAGE = { default: 50, max: 200 } as const;

/** The states a session is listed in (the `state` filter of the list). */
export const SESSION_STATES: readonly SessionState[] = ['running', 'waiting', 'idle', 'held'];

/**
 * The opaque cursor of a place in the session list: base64url of `[activeAt, sessionId]`. It
 * names a place, not a page, so a session whose activity changes while a client pages moves
 * ahead of the cursor instead of shifting the sessions behind it.
 */
export function encodeSessionCursor(key: SessionActivityKey): string {
  return Buffer.from(JSON.stringify([key.activeAt, key.sessionId]), 'utf8').toString('base64url');
}

/** The place a cursor names, or `undefined` when it is not a cursor of this list. */
export function decodeSessionCursor(cursor: string): SessionActivityKey | undefined {
  if (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(parsed) &&
      parsed.length === 2 &&
      typeof parsed[0] === 'string' &&
      typeof parsed[1] === 'string' &&
      parsed[0] !== ''
    ) {
      return { activeAt: parsed[0], sessionId: parsed[1] };
    }
  } catch {
    // Not JSON: not a cursor.
  }
  return undefined;
}

/**
 * The list query as it is run: the limit defaulted, the cursor decoded, each field checked (a
 * host calling the library gets the refusals the REST route's validation gives). Throws a
 * `TypeError` naming the field.
 */
export function checkedListQuery(query: SessionListQuery = {}): {
  limit: number;
  after?: SessionActivityKey;
  state?: SessionState;
} {
  const { limit = SESSION_PAGE.default, cursor, state } = query ?? {};
  if (!Number.isInteger(limit) || limit < 1 || limit > SESSION_PAGE.max) {
    throw new TypeError(`limit must be a whole number from 1 to ${SESSION_PAGE.max}`);
  }
  if (state !== undefined && !SESSION_STATES.includes(state)) {
    throw new TypeError(`state must be one of ${SESSION_STATES.join(', ')}`);
  }
  const after = cursor === undefined ? undefined : decodeSessionCursor(cursor);
  if (cursor !== undefined && !after) {
    throw new TypeError('cursor must be a nextCursor of this list');
  }
  return { limit, ...(after ? { after } : {}), ...(state ? { state } : {}) };
}
