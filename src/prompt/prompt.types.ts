import type { ContributionBucket, ModelMessage, TurnInput } from '../contracts';

/** What a contribution's `build(view)` receives (contract R2). */
export interface PromptView {
  sessionId: string;
  platform?: string;
  /** This turn's inputs (archived ones carry `archived`); empty for `token:request` estimates. */
  inputs: readonly TurnInput[];
  signal: AbortSignal;
  /** True for estimates (`token:request`): build what you would, but cause no side effects. */
  dryRun: boolean;
  /** A snapshot of the message list as assembled so far. */
  messages: readonly ModelMessage[];
}

/**
 * Where a contribution's block goes:
 * - `identity`: right after the first system message;
 * - `knowledge`, `context`: at the end of the leading system messages (knowledge first);
 * - `turn-context`: right before this turn's first input;
 * - `turn-hint`: right before the last user message.
 */
export type PromptAnchor = 'identity' | 'knowledge' | 'context' | 'turn-context' | 'turn-hint';

/** What a contribution returns: one block, several blocks, or nothing this time. */
export type ContributionOutput = string | string[] | null | undefined;

/** A contribution to the `agent:prompt` contribution point (R1-R3). */
export interface PromptContributionSpec {
  /** Local id, unique within its owner; no '/'. The global key is `<owner>/<key>`. */
  key: string;
  /** Bucket of the usage breakdown its tokens are counted in (U7). */
  bucket: ContributionBucket;
  /** Lower is placed first within its anchor. @default 0 */
  priority?: number;
  /** @default by bucket: persona -> identity, skills -> knowledge, memoryVector -> turn-context, platform -> turn-hint, others -> context */
  anchor?: PromptAnchor;
  /** Milliseconds before a slow build is skipped for this call. @default 10000 */
  timeoutMs?: number;
  build(view: PromptView): ContributionOutput | Promise<ContributionOutput>;
}

/** A registered contribution. */
export interface RegisteredContribution extends Required<Omit<PromptContributionSpec, 'build'>> {
  /** `<module instance id>/<local id>`: the key of `parts[].injectors` (R3). */
  globalKey: string;
  owner: string;
  build: PromptContributionSpec['build'];
}

/** Metadata the assembler writes on a materialised block. */
export interface ContributionBlockMetadata {
  injector: string;
  bucket: ContributionBucket;
}
