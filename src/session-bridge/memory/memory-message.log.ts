import { randomUUID } from 'node:crypto';
import {
  isControlKind,
  normaliseDeep,
  normaliseText,
  WellKnownMetadataKeys,
  type HistoryQuery,
  type HistoryStore,
  type Message,
  type MessageArchive,
  type NewMessage,
} from '../../contracts';

/**
 * In-memory history and archive over one message log per session. Serves both the
 * `HistoryStore` and the `MessageArchive` port. Returned messages are copies. Text is kept as
 * `normaliseText` makes it (ids included), as the SQL stores keep it.
 */
export class MemoryMessageLog implements HistoryStore, MessageArchive {
  private readonly sessions = new Map<string, Message[]>();
  private readonly byKey = new Map<string, Message>();
  private lastTime = 0;

  async append(messages: NewMessage[]): Promise<Message[]> {
    const stored: Message[] = [];
    for (const given of messages) {
      const input = normaliseDeep(given);
      const key = input.key;
      const existing = key !== undefined ? this.byKey.get(key) : undefined;
      if (existing) {
        stored.push(structuredClone(existing));
        continue;
      }
      const message: Message = {
        ...structuredClone(input),
        id: randomUUID(),
        createdAt: input.createdAt ?? this.now(),
      };
      const log = this.sessions.get(message.sessionId) ?? [];
      log.push(message);
      this.sessions.set(message.sessionId, log);
      if (key !== undefined) this.byKey.set(key, message);
      stored.push(structuredClone(message));
    }
    return stored;
  }

  async history(sessionId: string, query: HistoryQuery = {}): Promise<Message[]> {
    const log = this.sessions.get(normaliseText(sessionId)) ?? [];
    return structuredClone(sliceByConversationLimit(log, query.limit ?? 0));
  }

  async count(sessionId: string): Promise<number> {
    const log = this.sessions.get(normaliseText(sessionId)) ?? [];
    return log.filter((m) => !isControlKind(m.kind)).length;
  }

  async clear(sessionId?: string): Promise<void> {
    const ids = sessionId === undefined ? [...this.sessions.keys()] : [normaliseText(sessionId)];
    for (const id of ids) this.drop(id);
  }

  async rollbackTurn(sessionId: string, turnId: string): Promise<number> {
    const id = normaliseText(sessionId);
    const turn = normaliseText(turnId);
    const log = this.sessions.get(id) ?? [];
    const kept = log.filter((m) => m.metadata[WellKnownMetadataKeys.TurnId] !== turn);
    for (const m of log) if (!kept.includes(m) && m.key !== undefined) this.byKey.delete(m.key);
    this.sessions.set(id, kept);
    return log.length - kept.length;
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.drop(normaliseText(sessionId));
  }

  private drop(sessionId: string): void {
    for (const m of this.sessions.get(sessionId) ?? []) {
      if (m.key !== undefined) this.byKey.delete(m.key);
    }
    this.sessions.delete(sessionId);
  }

  /** Strictly increasing ISO times, so creation order is also time order. */
  private now(): string {
    this.lastTime = Math.max(Date.now(), this.lastTime + 1);
    return new Date(this.lastTime).toISOString();
  }
}

/**
 * The tail of `log` that holds the last `limit` conversation messages (control kinds among them
 * come along without counting). `limit` 0 = everything.
 */
export function sliceByConversationLimit<T extends { kind?: string }>(
  log: readonly T[],
  limit: number,
): T[] {
  if (!limit) return [...log];
  let seen = 0;
  for (let i = log.length - 1; i >= 0; i--) {
    if (!isControlKind(log[i].kind) && ++seen === limit) return log.slice(i);
  }
  return [...log];
}
