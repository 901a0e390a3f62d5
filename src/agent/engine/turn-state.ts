import type {
  ContentSegment,
  IncomingMessage,
  ModelMessage,
  SessionSettings,
  TurnEntry,
  NewMessage,
  TokenUsageEvent,
} from '../../contracts';
import { WellKnownMetadataKeys } from '../../contracts';
import type { ResolvedModel } from '../../llm';
import type { TokenEncoding, TokenEstimator } from '../../usage';
import { speakerContent, TURN_INPUT_FLAG } from '../../prompt';
import type { ResolvedAgentOptions } from '../agent.options';
import type { Turn } from './turn';

/** Read once: a re-exported binding is a getter call on every access. */
const K = WellKnownMetadataKeys;

/** The reply as finalised by `agent:reply:before`. */
export interface FinalReply {
  /** What is sent to the session; empty = silent. */
  visible: string;
  /** What is persisted. */
  stored: string;
  /** Decoded visible text of a structured-output envelope, when it differs from `stored`. */
  visibleContent?: string;
}

/** Everything a running turn accumulates; owned by one turn runner call. */
export class TurnState {
  model?: ResolvedModel;
  settings?: SessionSettings;
  /** The list the model calls are built from; grows with tool groups and joined inputs. */
  working: ModelMessage[] = [];
  /** `countHistory` after the opening inputs were archived (U5). */
  historyBase = 0;
  /** Tool-call messages, tool results and joined inputs appended so far (I15). */
  historyAdded = 0;
  /** Sticky for the turn once a hard trim happened (U3). */
  trimmed = false;
  /** History + tool-result tokens the first call's trim removed from the working list (U4). */
  historyCut = 0;
  /** Model calls made so far (format retries included). */
  calls = 0;
  /** Tool calls the model asked for so far (refused and unknown ones included). */
  toolCalls = 0;
  /** The last model call's `token:usage` event (the turn-end log line's context usage). */
  lastUsage?: TokenUsageEvent;
  /** When the turn started (`performance.now()`), for its duration in the turn-end log line. */
  readonly startedAt = performance.now();
  /** Whether inputs or tool groups of this turn are persisted (P5). */
  persistedAny = false;
  /** Prompt tokens of the last call and completion tokens of all calls. */
  promptTokens = 0;
  completionTokens = 0;
  reasoning: string[] = [];
  /** The opening inputs as model messages, built once when they are archived. */
  openingMessages: ModelMessage[] = [];
  /** The turn's timeline (P1): streamed text and reasoning, tool calls with their callId. */
  readonly segments: ContentSegment[] = [];

  constructor(readonly turn: Turn) {}

  get sessionId(): string {
    return this.turn.sessionId;
  }

  /** The first input: platform, kind and group of the turn. */
  get lead(): IncomingMessage {
    return this.turn.inputs[0].message;
  }

  get platform(): string | undefined {
    return this.lead.platform;
  }

  /** Rooms persist unsent drafts with `sent: false` (P2, I4). */
  get isRoom(): boolean {
    return (this.lead.sessionKind ?? this.settings?.kind) === 'room';
  }

  /**
   * The persistable token count of a message as the model will see it (keyed by encoding), so
   * a later turn, a restart or another instance does not count it again. `undefined` before
   * the model is known.
   */
  countFor(estimator: TokenEstimator, message: ModelMessage): Record<string, number> | undefined {
    return this.model ? estimator.persistableCount(message, this.encodingOf(estimator)) : undefined;
  }

  /**
   * Counts `messages` (messages this turn built and owns) into their own
   * `metadata.tokenCount`, off the loop when their uncached texts are large, so `countFor` and
   * every later count of them is a field read. Nothing before the model is known.
   */
  stampCounts(estimator: TokenEstimator, messages: readonly ModelMessage[]): void | Promise<void> {
    return this.model ? estimator.stampCounts(messages, this.encodingOf(estimator)) : undefined;
  }

  /**
   * The token encoding of the turn's model (its capability, else by model name); looked up once
   * per model (a turn asks for it a dozen times).
   */
  encodingOf(estimator: TokenEstimator): TokenEncoding {
    const model = this.model!;
    if (this.encodingKnown?.model !== model) {
      const { ref, capabilities } = model;
      this.encodingKnown = {
        model,
        encoding: estimator.encodingFor(ref.model, capabilities.encoding),
      };
    }
    return this.encodingKnown.encoding;
  }
  private encodingKnown?: { model: ResolvedModel; encoding: TokenEncoding };

  /** Adds streamed text or reasoning to the timeline, merging it into the previous piece. */
  addStreamed(type: 'text' | 'reasoning_text', delta: string): void {
    const last = this.segments[this.segments.length - 1];
    if (last?.type === type) last.content += delta;
    else this.segments.push({ type, content: delta });
  }

  get acceptsImages(): boolean {
    return this.model?.capabilities.vision ?? false;
  }

  /** U5: the history count of the next `token:usage`. */
  get historyMessages(): number {
    return this.historyBase + this.historyAdded;
  }
}

/** The source of idle topic openers: the agent speaking first, not anybody's words. */
export const IDLE_TRIGGER_SOURCE = 'idle-trigger';

/** H1: idle topic openers are never archived (opening a turn, or dropped). */
export function isArchivable(message: IncomingMessage): boolean {
  return message.source !== IDLE_TRIGGER_SOURCE;
}

/** The session's history count limit (U6). */
export function historyLimitOf(options: ResolvedAgentOptions, state: TurnState): number {
  return state.settings?.historyLimit ?? options.historyLimit;
}

/** The persisted form of an input (P3): with turn id and entry when it entered a turn. */
export function archivedInput(
  message: IncomingMessage,
  entry?: { turnId: string; entry: TurnEntry },
  tokenCount?: Record<string, number>,
): NewMessage {
  const metadata: Record<string, unknown> = { ...message.metadata };
  // Field by field (no list of pairs per input): the message fields kept as metadata.
  if (message.userId !== undefined) metadata[K.UserId] = message.userId;
  if (message.nickname !== undefined) metadata[K.Nickname] = message.nickname;
  if (message.platform !== undefined) metadata[K.Platform] = message.platform;
  if (message.source !== undefined) metadata[K.Source] = message.source;
  if (message.actor !== undefined) metadata[K.Actor] = message.actor;
  if (message.messageId !== undefined) metadata[K.MessageId] = message.messageId;
  if (message.groupId !== undefined) metadata[K.GroupId] = message.groupId;
  if (message.sessionKind !== undefined) metadata[K.SessionKind] = message.sessionKind;
  if (message.attachments !== undefined) metadata[K.Attachments] = message.attachments;
  if (entry) {
    metadata[K.TurnId] = entry.turnId;
    metadata[K.TurnEntry] = entry.entry;
  }
  if (tokenCount) metadata[K.TokenCount] = tokenCount;
  return { sessionId: message.sessionId, role: 'user', content: message.content, metadata };
}

/** An input as a user message for the model; images only when the model can see them (H2). */
export function inputToModelMessage(
  message: IncomingMessage,
  acceptsImages: boolean,
  room: boolean,
): ModelMessage {
  const content = speakerContent(message.content, message, room);
  const out: ModelMessage = { role: 'user', content, metadata: { [TURN_INPUT_FLAG]: true } };
  const images = (message.attachments ?? []).filter((a) => a.kind === 'image').map((a) => a.data);
  if (acceptsImages && images.length) out.images = images;
  return out;
}
