import {
  normaliseDeep,
  normaliseText,
  SessionNotFoundError,
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

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    sessionId = normaliseText(sessionId);
    const found = this.settings.get(sessionId);
    return found && plainCopy(found);
  }

  async ensure(
    sessionId: string,
    defaults: Omit<SessionSettings, 'sessionId'> = {},
  ): Promise<SessionSettings> {
    sessionId = normaliseText(sessionId);
    let found = this.settings.get(sessionId);
    if (!found) {
      found = { ...plainCopy(normaliseDeep(defaults)), sessionId };
      this.settings.set(sessionId, found);
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
    return plainCopy(found);
  }

  async delete(sessionId: string): Promise<void> {
    sessionId = normaliseText(sessionId);
    this.settings.delete(sessionId);
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
}
