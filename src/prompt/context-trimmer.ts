import type { ModelMessage } from '../contracts';
import {
  dropOldest,
  dropSystemBlocks,
  LIMITS,
  shortenReasoning,
  shrinkSystemBlocks,
  summariseToolGroups,
  Trim,
  TRIM_MARKERS,
  truncateToolOutputs,
} from './context-trimmer.phases';
import { TURN_INPUT_FLAG } from './prompt.assembler';

export { cutText, TRIM_MARKERS } from './context-trimmer.phases';

/** Limits and counting for one trim. */
export interface TrimLimits {
  /** Prompt token budget (context window minus the reply reservation). */
  budget: number;
  /** Tokens of one message (the cached estimator). */
  count: (message: ModelMessage) => number;
  /** Tokens of the tool definitions sent with the list. */
  toolTokens: number;
  /** Allowance of the contributed system blocks before they are shrunk. @default 4096 */
  systemAllowance?: number;
}

/** The result of a trim. */
export interface TrimResult {
  messages: ModelMessage[];
  /** Whether the list's estimate exceeded the budget before trimming (U3). */
  exceeded: boolean;
  /** Messages removed (summarised groups count their members). */
  removed: number;
}

/**
 * Hard trim of an assembled list to the token budget (issue 5). Works on copies; returns as soon
 * as the estimate fits. Order: shrink oversized system blocks, truncate long tool outputs,
 * shorten old reasoning, summarise old tool groups, drop the oldest history (whole groups),
 * and last drop contributed system blocks. Never removes the first system message, this turn's
 * inputs, the latest tool group or the last message, and never splits a tool group. When many
 * messages went, a continuation notice tells the model so.
 */
export function trimToBudget(list: readonly ModelMessage[], limits: TrimLimits): TrimResult {
  const t = new Trim(list, limits);
  if (t.fits) return { messages: t.list, exceeded: false, removed: 0 };
  shrinkSystemBlocks(t);
  const phases = [truncateToolOutputs, shortenReasoning, summariseToolGroups, dropOldest];
  for (const phase of phases) if (!t.fits) phase(t);
  if (!t.fits) dropSystemBlocks(t);
  if (t.removed >= LIMITS.continuationMinDropped) addContinuationNotice(t);
  return { messages: t.list, exceeded: true, removed: t.removed };
}

/** The notice goes right before this turn's inputs, so the list still ends with them. */
function addContinuationNotice(t: Trim): void {
  let at = t.list.findIndex((m) => m.metadata?.[TURN_INPUT_FLAG] === true);
  if (at < 0) at = Math.max(0, t.list.length - 1);
  const notice: ModelMessage = {
    role: 'system',
    content: TRIM_MARKERS.continuation,
    metadata: { injector: 'system-other', bucket: 'systemOther' },
  };
  t.list.splice(at, 0, notice);
  t.total += t.limits.count(notice);
  // The notice itself must fit too.
  if (!t.fits) dropOldest(t);
  if (!t.fits) dropSystemBlocks(t);
}

/** Options of the history allowance (issue 5, contract U3). */
export interface HistoryAllowance {
  /** Tokens history may take before a segment of its oldest part is dropped. */
  allowance: number;
  /** Minimum tokens one drop removes (keeps the request prefix stable across turns). */
  segment: number;
  count: (message: ModelMessage) => number;
}

/**
 * Keeps history (the conversation before this turn's first input) within its allowance by
 * dropping its oldest part in segments of at least `segment` tokens, whole tool groups at a
 * time, even when the whole request would fit. Returns the list and how many messages went.
 */
export function dropHistorySegments(
  list: readonly ModelMessage[],
  options: HistoryAllowance,
): { messages: ModelMessage[]; dropped: number } {
  const firstInput = list.findIndex((m) => m.metadata?.[TURN_INPUT_FLAG] === true);
  const end = firstInput < 0 ? list.length : firstInput;
  // History: conversation before the inputs, including stop markers loaded from history.
  const history: number[] = [];
  let total = 0;
  for (let i = 0; i < end; i++) {
    if (list[i].role === 'system' && list[i].metadata?.kind === undefined) continue;
    history.push(i);
    total += options.count(list[i]);
  }
  if (total <= options.allowance) return { messages: [...list], dropped: 0 };
  const drop = new Set<number>();
  let pos = 0;
  while (total > options.allowance && pos < history.length) {
    let segment = 0;
    while (segment < options.segment && pos < history.length) {
      const i = history[pos];
      let groupEnd = i + 1;
      if (list[i].role === 'assistant' && list[i].toolCalls?.length) {
        while (groupEnd < end && list[groupEnd].role === 'tool') groupEnd++;
      }
      for (let k = i; k < groupEnd; k++) {
        if (drop.has(k)) continue;
        drop.add(k);
        segment += options.count(list[k]);
      }
      while (pos < history.length && history[pos] < groupEnd) pos++;
    }
    total -= segment;
  }
  return { messages: list.filter((_, i) => !drop.has(i)), dropped: drop.size };
}
