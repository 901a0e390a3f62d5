import {
  isoNow,
  normaliseDeep,
  normaliseText,
  SessionNotFoundError,
  type SessionActivity,
  type SessionActivityKey,
  type SessionActivityQuery,
  type SessionEnsureOptions,
  type SessionSettings,
  type SessionStore,
} from '../../contracts';
import { plainCopy } from './frozen-copy';

/**
 * In-memory `SessionStore`: settings and generations of this process only. Text is kept as
 * `normaliseText` makes it (session ids included), as the SQL stores keep it.
 */
export class MemorySessionStore implements SessionStore {
  private readonly settings = new Map<string, SessionSettings>();
  private readonly generations = new Map<string, number>();
  /** Last activity (ISO-8601) of each session that has settings. */
  private readonly activity = new Map<string, string>();

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    sessionId = normaliseText(sessionId);
    const found = this.settings.get(sessionId);
    return found && plainCopy(found);
  }

  async ensure(
    sessionId: string,
    defaults: Omit<SessionSettings, 'sessionId'> = {},
    options: SessionEnsureOptions = {},
  ): Promise<SessionSettings> {
    sessionId = normaliseText(sessionId);
    let found = this.settings.get(sessionId);
    if (!found) {
      found = { ...plainCopy(normaliseDeep(defaults)), sessionId };
      this.settings.set(sessionId, found);
      this.activity.set(sessionId, options.activeAt ?? isoNow());
    } else if (options.activeAt) {
      this.touch(sessionId, options.activeAt);
    }
    return plainCopy(found);
  }

  async update(
    sessionId: string,
    patch: Omit<SessionSettings, 'sessionId'>,
  ): Promise<SessionSettings> {
    sessionId = normaliseText(sessionId);
    const found = this.settings.get(sessionId);
    if (!found) throw new SessionNotFoundError(sessionId);
    Object.assign(found, plainCopy(normaliseDeep(patch)), { sessionId });
    if (patch.lastTurn?.endedAt) this.touch(sessionId, patch.lastTurn.endedAt);
    return plainCopy(found);
  }

  async delete(sessionId: string): Promise<void> {
    sessionId = normaliseText(sessionId);
    this.settings.delete(sessionId);
    this.activity.delete(sessionId);
  }

  async generationOf(sessionId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    return this.generations.get(sessionId) ?? 0;
  }

  async advanceGeneration(sessionId: string): Promise<number> {
    sessionId = normaliseText(sessionId);
    const next = (this.generations.get(sessionId) ?? 0) + 1;
    this.generations.set(sessionId, next);
    return next;
  }

  async list(): Promise<string[]> {
    return [...this.settings.keys()];
  }

  /** Sorts every session on each call: fine for the sessions one process keeps in memory. */
  async listByActivity(query: SessionActivityQuery): Promise<SessionActivity[]> {
    const { limit, after } = query;
    const only = query.sessionIds && new Set(query.sessionIds.map((id) => normaliseText(id)));
    const keys: SessionActivityKey[] = [];
    for (const [sessionId, activeAt] of this.activity) {
      if (only && !only.has(sessionId)) continue;
      const key = { activeAt, sessionId };
      if (!after || compareKeys(key, after) < 0) keys.push(key);
    }
    return keys
      .sort((a, b) => compareKeys(b, a))
      .slice(0, Math.max(0, limit))
      .map(({ sessionId, activeAt }) => ({
        settings: plainCopy(this.settings.get(sessionId)!),
        activeAt,
      }));
  }

  /** Moves the session's activity to `at`, never back. */
  private touch(sessionId: string, at: string): void {
    const now = this.activity.get(sessionId);
    if (now === undefined || now < at) this.activity.set(sessionId, at);
  }
}

/** The activity order, ascending: by time, then by session id (code units). */
function compareKeys(a: SessionActivityKey, b: SessionActivityKey): number {
  if (a.activeAt !== b.activeAt) return a.activeAt < b.activeAt ? -1 : 1;
  return a.sessionId === b.sessionId ? 0 : a.sessionId < b.sessionId ? -1 : 1;
}
