import { Injectable } from '@nestjs/common';
import {
  SessionNotFoundError,
  type SessionSettings,
  type SessionStore,
} from 'nest-agent-orchestrator';

/**
 * The host's own session store, bound by token in `AppModule`. A real application would keep
 * these rows in its own database; a Map is enough to show the contract.
 */
@Injectable()
export class MapSessionStore implements SessionStore {
  private readonly settings = new Map<string, SessionSettings>();
  private readonly generations = new Map<string, number>();

  async get(sessionId: string): Promise<SessionSettings | undefined> {
    const found = this.settings.get(sessionId);
    return found && { ...found };
  }

  async ensure(
    sessionId: string,
    defaults: Omit<SessionSettings, 'sessionId'> = {},
  ): Promise<SessionSettings> {
    if (!this.settings.has(sessionId)) {
      console.log(`[session-store] new session ${sessionId}`);
      this.settings.set(sessionId, { ...defaults, sessionId });
    }
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
    return { ...updated };
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
