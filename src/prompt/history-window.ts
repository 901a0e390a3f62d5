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
  const dropped = keepToolGroups(messages, kept, undefined, (m) => m);
  return { kept, dropped };
}

/**
 * The one pass behind `sanitiseToolGroups` and `historyToModelMessages`: walks `messages`,
 * pushes `view(m)` into `into` for each message kept, and returns how many were dropped (orphan
 * tool results, incomplete tool-call groups). A message `skip` picks is passed over as if it
 * were not there (it neither breaks nor joins a group). The common group of one call is matched
 * without building a set.
 */
function keepToolGroups<T extends Pick<Message, 'role' | 'toolCalls' | 'toolCallId'>, V>(
  messages: readonly T[],
  into: V[],
  skip: ((message: T) => boolean) | undefined,
  view: (message: T) => V,
): number {
  let dropped = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (skip?.(message)) continue;
    if (message.role === 'tool') {
      dropped++;
      continue;
    }
    const calls = message.role === 'assistant' ? message.toolCalls : undefined;
    if (!calls?.length) {
      into.push(view(message));
      continue;
    }
    const expected = calls.map((c) => c.id);
    const start = into.length;
    into.push(view(message));
    let results = 0;
    let j = i + 1;
    for (; j < messages.length && expected.length > 0; j++) {
      const next = messages[j];
      if (skip?.(next)) continue;
      if (next.role !== 'tool') break;
      const at = next.toolCallId === undefined ? -1 : expected.indexOf(next.toolCallId);
      if (at < 0) break;
      expected[at] = expected[expected.length - 1];
      expected.pop();
      into.push(view(next));
      results++;
    }
    if (expected.length > 0) {
      into.length = start;
      dropped += 1 + results;
    }
    i = j - 1;
  }
  return dropped;
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
  if (!room) return content;
  const userId = typeof speaker.userId === 'string' ? speaker.userId : undefined;
  const nickname = typeof speaker.nickname === 'string' ? speaker.nickname : undefined;
  if (!(userId ?? nickname)) return content;
  const label = nickname && userId ? `${nickname}(${userId})` : (nickname ?? userId);
  return `[${label}]: ${content}`;
}

/** Options of `historyToModelMessages`. */
export interface HistoryViewOptions {
  /** Whether the session is a room: user messages then name their speaker. */
  room?: boolean;
  /**
   * Ids of messages to leave out as if they were not there (they neither break nor join a tool
   * group): a turn's own inputs, already in the list it builds.
   */
  exclude?: ReadonlySet<string>;
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
  const room = !!options.room;
  const { exclude } = options;
  const skip = exclude?.size
    ? (m: Message) => isEventMarker(m) || exclude.has(m.id)
    : isEventMarker;
  const out: ModelMessage[] = [];
  keepToolGroups(history, out, skip, (m) => modelView(m, room));
  return out;
}

function isEventMarker(m: Message): boolean {
  return m.kind === EVENT_MARKER;
}

/**
 * One stored message as the model sees it (see `historyToModelMessages`). The view and its
 * metadata are each one object literal with the fields the message has (a field added after
 * the literal would cost the object a separate property store): fields in the order role,
 * content, metadata (historyId, kind, tokenCount), toolCalls, toolCallId, reasoningContent.
 */
function modelView(m: Message, room: boolean): ModelMessage {
  const { role, kind } = m;
  const content = room && role === 'user' ? speakerContent(m.content, m.metadata, room) : m.content;
  const historyId = m.id;
  const tokenCount = m.metadata.tokenCount;
  let metadata: ModelMetadata;
  if (kind) metadata = tokenCount ? { historyId, kind, tokenCount } : { historyId, kind };
  else metadata = tokenCount ? { historyId, tokenCount } : { historyId };
  const toolCalls = m.toolCalls?.length ? m.toolCalls : undefined;
  const { toolCallId } = m;
  let out: ModelMessage;
  if (toolCalls) out = { role, content, metadata, toolCalls };
  else if (toolCallId) out = { role, content, metadata, toolCallId };
  else out = { role, content, metadata };
  if (toolCalls && toolCallId) out.toolCallId = toolCallId;
  if (m.reasoningContent) out.reasoningContent = m.reasoningContent;
  return out;
}

type ModelMetadata = NonNullable<ModelMessage['metadata']>;

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
