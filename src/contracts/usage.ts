/** The fixed buckets of `TokenUsageEvent.breakdown` (U7). */
export const USAGE_BUCKETS = [
  'system',
  'persona',
  'memorySummary',
  'memoryVector',
  'skills',
  'platform',
  'subtask',
  'systemOther',
  'history',
  'toolResults',
  'toolDefs',
  'reservedForReply',
] as const;

/** A bucket name of the breakdown. */
export type UsageBucket = (typeof USAGE_BUCKETS)[number];

/** The seven system sub-buckets a prompt contribution can belong to, in breakdown order. */
export const CONTRIBUTION_BUCKETS = [
  'persona',
  'memorySummary',
  'memoryVector',
  'skills',
  'platform',
  'subtask',
  'systemOther',
] as const satisfies readonly UsageBucket[];

/** The buckets a prompt contribution may belong to (the system sub-buckets). */
export type ContributionBucket = (typeof CONTRIBUTION_BUCKETS)[number];

/** Token estimate per bucket. */
export type UsageBreakdown = Record<UsageBucket, number>;

/** One display row of the estimate (U7). */
export interface TokenUsagePart {
  label: string;
  tokens: number;
  /** Tokens per contributor, keyed by its global key `<module instance id>/<local id>`. */
  injectors?: Record<string, number>;
}

/** The `token:usage` event (U1-U7). */
export interface TokenUsageEvent {
  sessionId: string;
  /** Absent only for `token:request` snapshots (T2). */
  turnId?: string;
  platform?: string;
  /** Prompt tokens reported by the model, or the estimate (U2). */
  used: number;
  usageRatio: number;
  contextWindow: number;
  tokenBudget: number;
  maxTokens: number;
  trimmed: boolean;
  untrimmedHistory: number;
  historyMessages: number;
  historyLimit: number;
  breakdown: UsageBreakdown;
  parts: TokenUsagePart[];
}
