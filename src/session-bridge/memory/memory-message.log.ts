import { frozenMessage } from './frozen-copy';
import {
  conversationTail,
  isControlKind,
  isoTime,
  newId,
  normaliseDeep,
  normaliseText,
  WellKnownMetadataKeys,
  type HistoryQuery,
  type HistoryStore,
  type Message,
  type MessageArchive,
  type NewMessage,
} from '../../contracts';

/** Read once: a re-exported binding is a getter call on every access. */
const isControl = isControlKind;

/**
 * In-memory history and archive over one message log per session. Serves both the
 * `HistoryStore` and the `MessageArchive` port. Text is kept as `normaliseText` makes it (ids
 * included), as the SQL stores keep it.
 *
 * Isolation without copying whole windows: a message is copied once when it is appended and
 * kept deeply frozen; what a caller gets is a fresh message whose top level and `metadata` are
 * its own (mutating them changes nothing here), while nested values (tool calls, attachments,
 * nested metadata) are the frozen originals, shared and read-only. Counting and rollback are
 * linear in what they touch, not in the session's length.
 */
export class MemoryMessageLog implements HistoryStore, MessageArchive {
  private readonly sessions = new Map<string, Message[]>();
  private readonly byKey = new Map<string, Message>();
  /** Conversation messages (not control kinds) per session: `count()` in constant time. */
  private readonly conversation = new Map<string, number>();
  private lastTime = 0;

  async append(messages: NewMessage[]): Promise<Message[]> {
    const stored: Message[] = [];
    for (const given of messages) {
      const input = normaliseDeep(given);
      const key = input.key;
      const existing = key !== undefined ? this.byKey.get(key) : undefined;
      if (existing) {
        stored.push(readCopy(existing));
        continue;
      }
      // The one copy of the caller's message, frozen: the caller keeps its own.
      const message = frozenMessage(input, newId(), input.createdAt ?? this.now());
      const log = this.sessions.get(message.sessionId) ?? [];
      log.push(message);
      this.sessions.set(message.sessionId, log);
      if (!isControl(message.kind)) this.addConversation(message.sessionId, 1);
      if (key !== undefined) this.byKey.set(key, message);
      stored.push(readCopy(message));
    }
    return stored;
  }

  async history(sessionId: string, query: HistoryQuery = {}): Promise<Message[]> {
    return (await this.readonlyHistory(sessionId, query)).map(readCopy);
  }

  /** The stored records themselves: deeply frozen, so a reader cannot change them. */
  async readonlyHistory(sessionId: string, query: HistoryQuery = {}): Promise<readonly Message[]> {
    let log = this.sessions.get(normaliseText(sessionId)) ?? [];
    if (query.before !== undefined) {
      const before = normaliseText(query.before);
      const at = log.findIndex((m) => m.id === before);
      log = at < 0 ? [] : log.slice(0, at);
    }
    return conversationTail(log, query.limit ?? 0);
  }

  async count(sessionId: string): Promise<number> {
    return this.conversation.get(normaliseText(sessionId)) ?? 0;
  }

  async clear(sessionId?: string): Promise<void> {
    const ids = sessionId === undefined ? [...this.sessions.keys()] : [normaliseText(sessionId)];
    for (const id of ids) this.drop(id);
  }

  async rollbackTurn(sessionId: string, turnId: string): Promise<number> {
    const id = normaliseText(sessionId);
    const turn = normaliseText(turnId);
    const log = this.sessions.get(id) ?? [];
    const kept: Message[] = [];
    let conversation = 0;
    for (const m of log) {
      if (m.metadata[WellKnownMetadataKeys.TurnId] !== turn) {
        kept.push(m);
        continue;
      }
      if (m.key !== undefined) this.byKey.delete(m.key);
      if (!isControl(m.kind)) conversation++;
    }
    this.sessions.set(id, kept);
    this.addConversation(id, -conversation);
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
    this.conversation.delete(sessionId);
  }

  private addConversation(sessionId: string, delta: number): void {
    const next = (this.conversation.get(sessionId) ?? 0) + delta;
    if (next > 0) this.conversation.set(sessionId, next);
    else this.conversation.delete(sessionId);
  }

  /** Strictly increasing ISO times, so creation order is also time order. */
  private now(): string {
    this.lastTime = Math.max(Date.now(), this.lastTime + 1);
    return isoTime(this.lastTime);
  }
}

/** What a reader gets: its own top level and metadata over the frozen stored message. */
function readCopy(message: Message): Message {
  return { ...message, metadata: { ...message.metadata } };
}
