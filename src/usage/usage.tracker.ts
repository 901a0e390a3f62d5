import { Injectable, Logger } from '@nestjs/common';
import {
  CONTRIBUTION_BUCKETS,
  escapeForLog,
  type ModelMessage,
  type ToolDefinition,
  type TokenUsageEvent,
  type UsageBreakdown,
  type UsageBucket,
} from '../contracts';
import type { TokenEncoding } from './encoding';
import { TokenEstimator } from './token-estimator';
import {
  bucketMessages,
  estimatedPromptTokens,
  usageParts,
  type BucketedUsage,
} from './usage-breakdown';

/** What `UsageTracker.buildEvent` needs to describe one model call (or a snapshot). */
export interface UsageEventInput {
  sessionId: string;
  /** Absent for `token:request` snapshots (T2). */
  turnId?: string;
  platform?: string;
  /** The message list as sent to the model (after trimming and `agent:llm:before`). */
  messages: readonly ModelMessage[];
  /** The tool definitions sent with it. */
  tools: readonly ToolDefinition[];
  encoding: TokenEncoding;
  contextWindow: number;
  maxTokens: number;
  tokenBudget: number;
  /** Prompt tokens the provider reported for the call; ignored unless a positive finite number. */
  reportedPromptTokens?: number;
  /** U3; decided by the caller. */
  trimmed: boolean;
  /** U4: history + tool results before any hard trim. @default history + toolResults of `messages` */
  untrimmedHistory?: number;
  /** U5 / I15; counted by the caller. */
  historyMessages: number;
  /** U6: the session's history count limit (0 = none). */
  historyLimit: number;
  /**
   * `bucketMessages` of these `messages`, `tools` and `maxTokens`, when the caller made it
   * already (the agent does while fitting a call): not computed again.
   */
  bucketed?: BucketedUsage;
}

/** Usage levels by `usageRatio`: >= .85, >= .7, >= .5, below. */
export const USAGE_LEVELS = ['OK', 'INFO', 'WARN', 'CRITICAL'] as const;

/** A usage level name. */
export type UsageLevel = (typeof USAGE_LEVELS)[number];

/**
 * Most sessions whose last level is kept, the most recently active ones: an idle session costs
 * nothing here, and one that comes back after it was forgotten warns again if it is high.
 */
const MAX_LOG_SESSIONS = 1_000;

/** The level index (0 OK .. 3 CRITICAL) of a usage ratio. */
export function usageLevel(ratio: number): 0 | 1 | 2 | 3 {
  if (ratio >= 0.85) return 3;
  if (ratio >= 0.7) return 2;
  if (ratio >= 0.5) return 1;
  return 0;
}

/** Buckets that are real shares of the prompt (no `system` total, no reply reservation). */
const SHARE_BUCKETS: readonly UsageBucket[] = [
  ...CONTRIBUTION_BUCKETS,
  'history',
  'toolResults',
  'toolDefs',
];

/** The `n` largest non-zero prompt shares of a breakdown, largest first. */
export function topBuckets(breakdown: UsageBreakdown, n = 3): Array<[UsageBucket, number]> {
  return SHARE_BUCKETS.map((bucket): [UsageBucket, number] => [bucket, breakdown[bucket]])
    .filter(([, tokens]) => tokens > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);
}

/**
 * Builds `token:usage` events (U2-U7) from the list as sent, and warns when a session's usage
 * climbs to WARN or CRITICAL. `buildEvent` is synchronous so the agent can emit the event as
 * soon as a call returns (I12). The usage of every turn is in its turn-end log line.
 */
@Injectable()
export class UsageTracker {
  private readonly logger = new Logger(UsageTracker.name);
  /** Session -> its last usage level (index in `USAGE_LEVELS`). */
  private readonly levels = new Map<string, number>();

  /** @param estimator counts (and caches) message and tool tokens. */
  constructor(private readonly estimator: TokenEstimator) {}

  /**
   * The usage event of one model call or snapshot. `used` is the provider's prompt tokens when
   * reported as a positive finite number, else the estimate (U2); `usageRatio = used /
   * contextWindow` (0 when the window is not positive); `untrimmedHistory` defaults to history +
   * tool results (U4); `breakdown` and `parts` are computed from the list as sent (U7).
   */
  buildEvent(input: UsageEventInput): TokenUsageEvent {
    const { encoding } = input;
    const usage =
      input.bucketed ??
      bucketMessages(
        input.messages,
        (message) => this.estimator.countMessage(message, encoding),
        this.estimator.countTools(input.tools, encoding),
        input.maxTokens,
      );
    const { breakdown } = usage;
    const reported = input.reportedPromptTokens;
    const used =
      typeof reported === 'number' && Number.isFinite(reported) && reported > 0
        ? reported
        : estimatedPromptTokens(breakdown);
    // One literal; the optional fields after it (spread into it, every later field would be
    // added one by one, the slow way).
    const event: TokenUsageEvent = {
      sessionId: input.sessionId,
      used,
      usageRatio: input.contextWindow > 0 ? used / input.contextWindow : 0,
      contextWindow: input.contextWindow,
      tokenBudget: input.tokenBudget,
      maxTokens: input.maxTokens,
      trimmed: input.trimmed,
      untrimmedHistory: input.untrimmedHistory ?? breakdown.history + breakdown.toolResults,
      historyMessages: input.historyMessages,
      historyLimit: input.historyLimit,
      breakdown,
      parts: usageParts(usage),
    };
    if (input.turnId !== undefined) event.turnId = input.turnId;
    if (input.platform !== undefined) event.platform = input.platform;
    return event;
  }

  /** Like `buildEvent`, but counts large uncached messages in worker threads first. */
  async buildEventAsync(input: UsageEventInput): Promise<TokenUsageEvent> {
    await this.estimator.countMessagesAsync(input.messages, input.encoding);
    return this.buildEvent(input);
  }

  /**
   * Usage warnings: one line when a session's level changes to WARN (`usageRatio` >= .7) or
   * CRITICAL (>= .85), naming the top three buckets; nothing for OK and INFO (the turn-end log
   * line has every turn's usage). Returns whether it logged.
   */
  noteUsage(event: TokenUsageEvent): boolean {
    const last = this.levels.get(event.sessionId);
    // Re-inserted on use: the map's first key is the least recently active session.
    if (last !== undefined) this.levels.delete(event.sessionId);
    const level = usageLevel(event.usageRatio);
    this.levels.set(event.sessionId, level);
    if (this.levels.size > MAX_LOG_SESSIONS) {
      this.levels.delete(this.levels.keys().next().value as string);
    }
    if (level === last || level < 2) return false;
    this.logger.warn(formatUsageLine(event, USAGE_LEVELS[level]));
    return true;
  }

  /** Drops the last level of a session (e.g. when it is deleted). */
  forget(sessionId: string): void {
    this.levels.delete(sessionId);
  }
}

/** One usage warning line: session, used / window (percent), level, top three buckets. */
export function formatUsageLine(event: TokenUsageEvent, level: UsageLevel): string {
  const percent = (event.usageRatio * 100).toFixed(1);
  const top = topBuckets(event.breakdown)
    .map(([bucket, tokens]) => `${bucket} ${tokens}`)
    .join(', ');
  const turn = event.turnId ? ` turn ${escapeForLog(event.turnId)}` : ' snapshot';
  return (
    `session ${escapeForLog(event.sessionId)}${turn} ${level} ` +
    `${event.used}/${event.contextWindow} tokens (${percent}%); top: ${top || 'none'}; reserve ${event.breakdown.reservedForReply}`
  );
}
