import {
  ControlKinds,
  type HistoryQuery,
  type HistoryStore,
  type Message,
  type ModelMessage,
} from '../contracts';

/** Read once: a re-exported binding is a getter call on every access. */
const EVENT_MARKER = ControlKinds.EventMarker;

/**
 * Drops orphan tool calls from history before it is sent: a tool result that does not follow
 * its call, and an assistant tool call whose results are not all there (with the results it
 * has). Everything else passes through in order. Returns the kept messages.
 */
export function sanitiseToolGroups<T extends Pick<Message, 'role' | 'toolCalls' | 'toolCallId'>>(
  messages: readonly T[],
): { kept: T[]; dropped: number } {
  const kept: T[] = [];
  let dropped = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message.role === 'tool') {
      dropped++;
      continue;
    }
    if (message.role !== 'assistant' || !message.toolCalls?.length) {
      kept.push(message);
      continue;
    }
    const expected = new Set(message.toolCalls.map((c) => c.id));
    const results: T[] = [];
    let j = i + 1;
    while (j < messages.length && messages[j].role === 'tool') {
      const id = messages[j].toolCallId;
      if (id === undefined || !expected.has(id)) break;
      expected.delete(id);
      results.push(messages[j]);
      j++;
    }
    if (expected.size === 0) kept.push(message, ...results);
    else dropped += 1 + results.length;
    i = j - 1;
  }
  return { kept, dropped };
}

/**
 * A user message's text for the model: in rooms (several people talk) it names its speaker,
 * `[nickname(userId)]: text`; elsewhere it is the text as sent. Used for new inputs and for
 * inputs loaded from history alike, so a message reads the same in every turn.
 */
export function speakerContent(
  content: string,
  speaker: { userId?: unknown; nickname?: unknown },
  room: boolean,
): string {
  const userId = typeof speaker.userId === 'string' ? speaker.userId : undefined;
  const nickname = typeof speaker.nickname === 'string' ? speaker.nickname : undefined;
  if (!room || !(userId ?? nickname)) return content;
  const label = nickname && userId ? `${nickname}(${userId})` : (nickname ?? userId);
  return `[${label}]: ${content}`;
}

/** Options of `historyToModelMessages`. */
export interface HistoryViewOptions {
  /** Whether the session is a room: user messages then name their speaker. */
  room?: boolean;
}

/**
 * History as the model sees it: event markers are left out; stop markers (P5) are kept as
 * system notes (they tell the next model that inputs went unanswered); everything else keeps its
 * role and content. `metadata.kind` carries the stored kind for the usage buckets, and a
 * persisted token count comes along so nobody recounts it.
 */
export function historyToModelMessages(
  history: readonly Message[],
  options: HistoryViewOptions = {},
): ModelMessage[] {
  const visible = history.filter((m) => m.kind !== EVENT_MARKER);
  return sanitiseToolGroups(visible).kept.map((m) => {
    const content =
      m.role === 'user' ? speakerContent(m.content, m.metadata, !!options.room) : m.content;
    const out: ModelMessage = { role: m.role, content, metadata: { historyId: m.id } };
    if (m.kind) out.metadata!.kind = m.kind;
    if (m.metadata.tokenCount) out.metadata!.tokenCount = m.metadata.tokenCount;
    if (m.toolCalls?.length) out.toolCalls = m.toolCalls;
    if (m.toolCallId) out.toolCallId = m.toolCallId;
    if (m.reasoningContent) out.reasoningContent = m.reasoningContent;
    return out;
  });
}

/**
 * History for building a model call, which changes nothing it reads: the store's own frozen
 * records when it offers them (`readonlyHistory`), else `history`.
 */
export function historyForModel(
  store: HistoryStore,
  sessionId: string,
  query?: HistoryQuery,
): Promise<readonly Readonly<Message>[]> {
  return store.readonlyHistory
    ? store.readonlyHistory(sessionId, query)
    : store.history(sessionId, query);
}
