/**
 * Message vocabulary: what comes in, what goes out, and what is persisted.
 * Types only: this folder has no Nest runtime and imports nothing from `src/`.
 */

/** Who authorised a message, or who stopped a turn (`abort`'s `by`). */
export interface Actor {
  platform: string;
  userId: string;
}

/** One attachment of an incoming or outgoing message. */
export interface MessageAttachment {
  kind: 'image' | 'audio' | 'video' | 'file';
  /** data URL, http(s) URL or file:// URL. */
  data: string;
  mimeType?: string;
  name?: string;
}

/**
 * Session kind. `room` covers IM groups and direct chats (contract P2, I4); other kinds such as
 * `web` and `api` send their reply the same way but do not persist unsent drafts.
 */
export type SessionKind = 'room' | 'web' | 'api' | (string & {});

/** One input given to `AgentService.handleMessage` (contract "input"). */
export interface IncomingMessage {
  sessionId: string;
  content: string;
  /** Platform the message came from. @default 'api' */
  platform?: string;
  userId?: string;
  nickname?: string;
  /** The platform's own id of the message. */
  messageId?: string;
  /** Absent for a human input; set for scheduler, proactive, subtask, webhook, ... inputs. */
  source?: string;
  /** Who authorised a system-originated message; tools act with this identity (H5). */
  actor?: Actor;
  attachments?: MessageAttachment[];
  sessionKind?: SessionKind;
  groupId?: string;
  /** Free-form data a preprocessor or host wants to carry along; persisted with the input. */
  metadata?: Record<string, unknown>;
}

/**
 * One piece of a turn's timeline, in the order it happened: text and reasoning as streamed
 * (adjacent pieces of one type merged) and each tool call with its `callId` (P1).
 */
export type ContentSegment =
  | { type: 'text'; content: string }
  | { type: 'reasoning_text'; content: string }
  | {
      type: 'tool_call';
      callId: string;
      name: string;
      args: unknown;
      result?: string;
      ok?: boolean;
      startTime?: number;
      endTime?: number;
    };

/** A message the agent sends to the session (`outbound:message`). */
export interface OutgoingMessage {
  sessionId: string;
  content: string;
  /** The turn that produced it (T1); absent only outside turns. */
  turnId?: string;
  platform?: string;
  /** `agent` for model replies, `system` for `[error]` / `[system]` notices. */
  source: 'agent' | 'system';
  reasoningContent?: string;
  /** The turn's timeline: text, reasoning and tool calls in order (P1). */
  segments?: ContentSegment[];
  attachments?: MessageAttachment[];
  model?: ModelRefLike;
  tokens?: { prompt?: number; completion?: number };
}

/** Structural copy of `ModelRef` to keep this file free of imports. */
export interface ModelRefLike {
  provider?: string;
  model: string;
}

/** Roles of persisted and model messages. */
export type MessageRole = 'user' | 'assistant' | 'tool' | 'system';

/** Kinds of persisted messages that are bookkeeping, not conversation (never sent as-is). */
export const ControlKinds = {
  /** A turn record for a turn without a persisted reply (P4). */
  EventMarker: 'event-marker',
  /** The stop marker of an aborted turn (P5); sent to the next model, not drawn by history views. */
  TurnStopped: 'turn-stopped',
} as const;

/** A control kind of message. */
export type ControlKind = (typeof ControlKinds)[keyof typeof ControlKinds];

/** Every control kind; such messages never count in `historyMessages` (U5). */
export const CONTROL_KINDS: readonly string[] = Object.values(ControlKinds);

/** Whether a message kind is a control kind. */
export function isControlKind(kind: string | undefined): boolean {
  return kind !== undefined && CONTROL_KINDS.includes(kind);
}

/** A tool call as the model asked for it (OpenAI chat wire shape). */
export interface ToolCall {
  /** The provider's id, used to pair the call with its result (`toolCallId`). */
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A message as persisted in history (README, "What a turn writes"). */
export interface Message {
  id: string;
  sessionId: string;
  role: MessageRole;
  content: string;
  kind?: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  reasoningContent?: string;
  /** Never sent to the model. Keys come from `WellKnownMetadataKeys` or from hooks. */
  metadata: Record<string, unknown>;
  /** ISO-8601 time of persistence. */
  createdAt: string;
  /** Idempotency key: a message with a key already stored is not written again. */
  key?: string;
}

/** A message not yet persisted: the store assigns `id` and `createdAt`. */
export type NewMessage = Omit<Message, 'id' | 'createdAt'> & { createdAt?: string };

/** A message as sent to a model (no persistence fields). */
export interface ModelMessage {
  role: MessageRole;
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  reasoningContent?: string;
  /** Image URLs of a user message, sent only when the model accepts images (H2). */
  images?: string[];
  /** Bookkeeping (buckets, injectors, ids); never sent over the wire. */
  metadata?: Record<string, unknown>;
}
