import { SessionNotFoundError, type SessionSettings, type SessionStore } from '../../contracts';

/** In-memory `SessionStore`: settings and generations of this process only. */
export class MemorySessionStore implements SessionStore {
  private readonly settings = new Map<string, SessionSettings>();
  private readonly generations = new Map<string, number>();

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    const found = this.settings.get(sessionId);
    return found && structuredClone(found);
  }

  async ensure(
    sessionId: string,
    defaults: Omit<SessionSettings, 'sessionId'> = {},
  ): Promise<SessionSettings> {
    let found = this.settings.get(sessionId);
    if (!found) {
      found = { ...structuredClone(defaults), sessionId };
      this.settings.set(sessionId, found);
    }
    return structuredClone(found);
  }

  async update(
    sessionId: string,
    patch: Omit<SessionSettings, 'sessionId'>,
  ): Promise<SessionSettings> {
    const found = this.settings.get(sessionId);
    if (!found) throw new SessionNotFoundError(sessionId);
    Object.assign(found, structuredClone(patch), { sessionId });
    return structuredClone(found);
  }

  async delete(sessionId: string): Promise<void> {
    this.settings.delete(sessionId);
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
}
