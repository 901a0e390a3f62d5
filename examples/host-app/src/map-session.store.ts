import { Injectable } from '@nestjs/common';
import {
  SessionNotFoundError,
  type SessionActivity,
  type SessionActivityKey,
  type SessionActivityQuery,
  type SessionEnsureOptions,
  type SessionSettings,
  type SessionStore,
} from 'nest-agent-orchestrator';

/** Most recent first, then by id descending: the order `listByActivity` pages by. */
const newestFirst = (a: SessionActivityKey, b: SessionActivityKey) =>
  a.activeAt !== b.activeAt
    ? (a.activeAt < b.activeAt ? 1 : -1)
    : a.sessionId === b.sessionId
      ? 0
      : a.sessionId < b.sessionId
        ? 1
        : -1;

/**
 * The host's own session store, bound by token in `AppModule`. A real application would keep
 * these rows in its own database; a Map is enough to show the contract.
 */
@Injectable()
export class MapSessionStore implements SessionStore {
  private readonly settings = new Map<string, SessionSettings>();
  private readonly generations = new Map<string, number>();
  /** Last activity (ISO-8601) per session: for the dashboard's and `GET /sessions`' list. */
  private readonly activity = new Map<string, string>();

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    const found = this.settings.get(sessionId);
    return found && { ...found };
  }

  async ensure(
    sessionId: string,
    defaults: Omit<SessionSettings, 'sessionId'> = {},
    options: SessionEnsureOptions = {},
  ): Promise<SessionSettings> {
    if (!this.settings.has(sessionId)) {
      console.log(`[session-store] new session ${sessionId}`);
      this.settings.set(sessionId, { ...defaults, sessionId });
    }
    this.touch(sessionId, options.activeAt ?? new Date().toISOString());
    return { ...this.settings.get(sessionId)! };
  }

  async update(
    sessionId: string,
    patch: Omit<SessionSettings, 'sessionId'>,
  ): Promise<SessionSettings> {
    const found = this.settings.get(sessionId);
    if (!found) throw new SessionNotFoundError(sessionId);
    const updated = { ...found, ...patch, sessionId };
    this.settings.set(sessionId, updated);
    if (patch.lastTurn?.endedAt) this.touch(sessionId, patch.lastTurn.endedAt);
    return { ...updated };
  }

  async delete(sessionId: string): Promise<void> {
    this.settings.delete(sessionId);
    this.activity.delete(sessionId);
  }

  async generationOf(sessionId: string): Promise<number> {
    return this.generations.get(sessionId) ?? 0;
  }

  async advanceGeneration(sessionId: string): Promise<number> {
    const next = (this.generations.get(sessionId) ?? 0) + 1;
    this.generations.set(sessionId, next);
    return next;
  }

  async list(): Promise<string[]> {
    return [...this.settings.keys()];
  }

  /** One page of the sessions, most recent activity first (a database would use an index). */
  async listByActivity(query: SessionActivityQuery): Promise<SessionActivity[]> {
    const only = query.sessionIds && new Set(query.sessionIds);
    return [...this.activity]
      .map(([sessionId, activeAt]) => ({ sessionId, activeAt }))
      .filter((key) => !only || only.has(key.sessionId))
      .filter((key) => !query.after || newestFirst(query.after, key) < 0)
      .sort(newestFirst)
      .slice(0, query.limit)
      .map(({ sessionId, activeAt }) => ({ settings: { ...this.settings.get(sessionId)! }, activeAt }));
  }

  /** Moves a session's activity forward to `at`, never back. */
  private touch(sessionId: string, at: string): void {
    const now = this.activity.get(sessionId);
    if (now === undefined || now < at) this.activity.set(sessionId, at);
  }
}
