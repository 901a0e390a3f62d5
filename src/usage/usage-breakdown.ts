import {
  CONTRIBUTION_BUCKETS,
  isControlKind,
  USAGE_BUCKETS,
  type ContributionBucket,
  type ModelMessage,
  type TokenUsagePart,
  type UsageBreakdown,
} from '../contracts';

/** Read once: a re-exported binding is a getter call on every access. */
const isControl = isControlKind;

/** The bucket one sent message is counted in. */
export type MessageBucket = ContributionBucket | 'history' | 'toolResults';

/** A bucket that is shown as a row of `parts` (everything but `system` and `reservedForReply`). */
export type PartBucket = MessageBucket | 'toolDefs';

/** The rows of `parts` in display order, with their labels (U7). */
export const USAGE_PART_ROWS: ReadonlyArray<{ bucket: PartBucket; label: string }> = [
  { bucket: 'persona', label: 'Persona' },
  { bucket: 'skills', label: 'Skills' },
  { bucket: 'memorySummary', label: 'Memory summary' },
  { bucket: 'memoryVector', label: 'Memory (retrieved)' },
  { bucket: 'platform', label: 'Platform' },
  { bucket: 'subtask', label: 'Subtasks' },
  { bucket: 'systemOther', label: 'Other system' },
  { bucket: 'history', label: 'History' },
  { bucket: 'toolResults', label: 'Tool results' },
  { bucket: 'toolDefs', label: 'Tool definitions' },
];

/** Where a message is counted: its bucket and, for a contribution block, its injector key. */
export interface MessageSlot {
  bucket: MessageBucket;
  /** Global key `<module instance id>/<local id>` of the contribution that produced it. */
  injector?: string;
}

/** A message as bucketed: a model message, or a history record that carries `kind`. */
export type BucketableMessage = ModelMessage & { kind?: string };

/** The estimate of a sent list by bucket, with per-injector detail of each bucket. */
export interface BucketedUsage {
  breakdown: UsageBreakdown;
  /** Per bucket: injector global key -> tokens, for buckets where any block had an injector. */
  injectors: Partial<Record<MessageBucket, Record<string, number>>>;
}

/** The message's kind: its own `kind`, else `metadata.kind`. */
function kindOf(message: BucketableMessage): string | undefined {
  const kind = message.kind ?? message.metadata?.kind;
  return typeof kind === 'string' ? kind : undefined;
}

/** Whether a message is bookkeeping (event marker, stop marker, ...), not conversation (U5). */
export function isControlMessage(message: BucketableMessage): boolean {
  return isControl(kindOf(message));
}

/**
 * Conversation messages in a list: every message whose kind is not a control kind (U5, I15).
 * The agent adds its in-turn tool calls, results and joined inputs on top of this.
 */
export function countConversationMessages(messages: readonly BucketableMessage[]): number {
  let count = 0;
  for (const message of messages) if (!isControlMessage(message)) count += 1;
  return count;
}

/**
 * The bucket of one sent message (U7): a system message goes to its `metadata.bucket` when that
 * is a contribution bucket (with `metadata.injector` as its injector), to `history` when it has a
 * control kind (e.g. a `turn-stopped` marker), else to `systemOther`; tool results go to
 * `toolResults`; everything else to `history`.
 */
export function classifyMessage(message: BucketableMessage): MessageSlot {
  if (message.role === 'tool') return TOOL_RESULTS_SLOT;
  if (message.role !== 'system') return HISTORY_SLOT;
  const bucket = message.metadata?.bucket;
  const injector = message.metadata?.injector;
  const key = typeof injector === 'string' && injector !== '' ? injector : undefined;
  if (typeof bucket === 'string' && (CONTRIBUTION_BUCKETS as readonly string[]).includes(bucket)) {
    return key
      ? { bucket: bucket as ContributionBucket, injector: key }
      : { bucket: bucket as ContributionBucket };
  }
  if (isControlMessage(message)) return HISTORY_SLOT;
  return key ? { bucket: 'systemOther', injector: key } : { bucket: 'systemOther' };
}

/** The slots of most messages, shared (slots are read, never changed). */
const TOOL_RESULTS_SLOT: MessageSlot = Object.freeze({ bucket: 'toolResults' });
const HISTORY_SLOT: MessageSlot = Object.freeze({ bucket: 'history' });

/** Every bucket at 0, copied by `emptyBreakdown` (one object spread, no entries arrays). */
const ZERO_BREAKDOWN = Object.freeze(
  Object.fromEntries(USAGE_BUCKETS.map((bucket) => [bucket, 0])) as UsageBreakdown,
);

/** A breakdown with every bucket at 0. */
export function emptyBreakdown(): UsageBreakdown {
  return { ...ZERO_BREAKDOWN };
}

/**
 * Buckets a sent message list (U7). `count` gives one message's tokens; `toolDefs` is the tool
 * definitions' estimate and `reservedForReply` the reply reservation (`maxTokens`). `system` is
 * the sum of the seven system sub-buckets.
 */
export function bucketMessages(
  messages: readonly BucketableMessage[],
  count: (message: BucketableMessage) => number,
  toolDefs: number,
  reservedForReply: number,
): BucketedUsage {
  const bucketer = new UsageBucketer();
  for (const message of messages) bucketer.add(message, count(message));
  return bucketer.finish(toolDefs, reservedForReply);
}

/**
 * `bucketMessages` one message at a time, for a pass that counts the messages anyway (the
 * precount of a model call): `add` each message with its tokens, in order, then `finish`.
 */
export class UsageBucketer {
  private readonly breakdown = emptyBreakdown();
  private readonly injectors: BucketedUsage['injectors'] = {};
  /** Messages added so far. */
  added = 0;

  /** Adds one message's tokens to its bucket (and its injector's row). */
  readonly add = (message: BucketableMessage, tokens: number): void => {
    this.added++;
    const slot = classifyMessage(message);
    this.breakdown[slot.bucket] += tokens;
    if (slot.injector) {
      const row = (this.injectors[slot.bucket] ??= {});
      row[slot.injector] = (row[slot.injector] ?? 0) + tokens;
    }
  };

  /** The buckets of the messages added, with the tool definitions and the reply reservation. */
  finish(toolDefs: number, reservedForReply: number): BucketedUsage {
    const { breakdown } = this;
    breakdown.system = CONTRIBUTION_BUCKETS.reduce((sum, bucket) => sum + breakdown[bucket], 0);
    breakdown.toolDefs = toolDefs;
    breakdown.reservedForReply = reservedForReply;
    return { breakdown, injectors: this.injectors };
  }
}

/** The estimated prompt tokens of a breakdown: system + history + tool results + tool definitions (U2). */
export function estimatedPromptTokens(breakdown: UsageBreakdown): number {
  return breakdown.system + breakdown.history + breakdown.toolResults + breakdown.toolDefs;
}

/**
 * The display rows of a bucketed estimate (U7): display order, zero rows omitted, no reply
 * reservation; a row carries `injectors` (global key -> tokens) when any of its blocks had one.
 */
export function usageParts(usage: BucketedUsage): TokenUsagePart[] {
  const parts: TokenUsagePart[] = [];
  for (const { bucket, label } of USAGE_PART_ROWS) {
    const tokens = usage.breakdown[bucket];
    if (!tokens) continue;
    const injectors = bucket === 'toolDefs' ? undefined : usage.injectors[bucket];
    parts.push(injectors ? { label, tokens, injectors: { ...injectors } } : { label, tokens });
  }
  return parts;
}
