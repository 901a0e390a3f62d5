import type { ModelMessage } from '../contracts';
import { TURN_INPUT_FLAG } from './prompt.assembler';

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

/** Marker texts appended where content was cut. */
export const TRIM_MARKERS = {
  system: '\n[... reduced to fit the context window]',
  tool: '\n[... tool output truncated to fit the context window]',
  reasoning: '\n[... reasoning truncated]',
  continuation:
    'Earlier parts of this conversation were removed to fit the context window. Continue the task from what is still visible; ask the user if something essential is missing.',
} as const;

const LIMITS = {
  systemKeepChars: 200,
  toolTriggerChars: 1500,
  toolKeepChars: 500,
  reasoningKeepChars: 200,
  newestReasoningKeepChars: 400,
  groupResultChars: 100,
  continuationMinDropped: 6,
};

/** Cuts a string at `n` UTF-16 units without splitting a surrogate pair. */
export function cutText(text: string, n: number): string {
  if (text.length <= n) return text;
  const code = text.charCodeAt(n - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}

/** A changed copy of a message; a persisted token count no longer applies to it. */
function changed(message: ModelMessage, patch: Partial<ModelMessage>): ModelMessage {
  const { tokenCount: _stale, ...metadata } = message.metadata ?? {};
  return { ...message, ...patch, metadata };
}

/** Indices of tool groups: an assistant with tool calls and the tool results right after it. */
function toolGroups(list: readonly ModelMessage[]): { start: number; end: number }[] {
  const groups: { start: number; end: number }[] = [];
  for (let i = 0; i < list.length; i++) {
    if (list[i].role !== 'assistant' || !list[i].toolCalls?.length) continue;
    let end = i + 1;
    while (end < list.length && list[end].role === 'tool') end++;
    groups.push({ start: i, end });
    i = end - 1;
  }
  return groups;
}

/**
 * Working state of one trim: the list, the running estimate and what must never be removed
 * (the first system message, this turn's inputs, the latest tool group, the last message).
 */
class Trim {
  list: ModelMessage[];
  total: number;
  removed = 0;

  constructor(
    list: readonly ModelMessage[],
    readonly limits: TrimLimits,
  ) {
    this.list = [...list];
    this.total = this.list.reduce((sum, m) => sum + limits.count(m), limits.toolTokens);
  }

  get fits(): boolean {
    return this.total <= this.limits.budget;
  }

  isProtected(index: number): boolean {
    const m = this.list[index];
    if (index === this.list.length - 1) return true;
    if (index === 0 && m.role === 'system') return true;
    if (m.metadata?.[TURN_INPUT_FLAG] === true) return true;
    const last = toolGroups(this.list).pop();
    return !!last && index >= last.start && index < last.end;
  }

  replace(index: number, next: ModelMessage): void {
    this.total += this.limits.count(next) - this.limits.count(this.list[index]);
    this.list[index] = next;
  }

  remove(start: number, end: number, insert?: ModelMessage): void {
    for (let i = start; i < end; i++) this.total -= this.limits.count(this.list[i]);
    const added = insert ? [insert] : [];
    for (const m of added) this.total += this.limits.count(m);
    this.list.splice(start, end - start, ...added);
    this.removed += end - start - added.length;
  }

  /** Interior system blocks: contributed parts between the head and the last message. */
  interiorSystem(): number[] {
    const out: number[] = [];
    for (let i = 1; i < this.list.length - 1; i++) if (this.list[i].role === 'system') out.push(i);
    return out;
  }
}

/** Phase 1: shrink oversized contributed system blocks to their share of the allowance. */
function shrinkSystemBlocks(t: Trim): void {
  const allowance = t.limits.systemAllowance ?? 4096;
  const blocks = t.interiorSystem().filter((i) => !t.isProtected(i));
  const total = blocks.reduce((sum, i) => sum + t.limits.count(t.list[i]), 0);
  if (total <= allowance) return;
  const ratio = allowance / total;
  for (const i of blocks) {
    const content = t.list[i].content;
    if (content.length <= LIMITS.systemKeepChars) continue;
    const keep = Math.max(LIMITS.systemKeepChars, Math.floor(content.length * ratio));
    if (keep >= content.length) continue;
    t.replace(i, changed(t.list[i], { content: cutText(content, keep) + TRIM_MARKERS.system }));
  }
}

/** Phase 2: truncate long tool outputs, oldest first. */
function truncateToolOutputs(t: Trim): void {
  for (let i = 1; i < t.list.length && !t.fits; i++) {
    const m = t.list[i];
    if (m.role !== 'tool' || t.isProtected(i) || m.content.length <= LIMITS.toolTriggerChars) {
      continue;
    }
    const content = cutText(m.content, LIMITS.toolKeepChars) + TRIM_MARKERS.tool;
    t.replace(i, changed(m, { content }));
  }
}

/** Phase 3: shorten old reasoning (never removed: some providers need it echoed back). */
function shortenReasoning(t: Trim): void {
  const withReasoning = t.list
    .map((m, i) => ({ m, i }))
    .filter(({ m }) => (m.reasoningContent?.length ?? 0) > LIMITS.reasoningKeepChars);
  const newest = withReasoning.at(-1)?.i;
  for (const { m, i } of withReasoning) {
    if (t.fits) return;
    const keep = i === newest ? LIMITS.newestReasoningKeepChars : LIMITS.reasoningKeepChars;
    if (m.reasoningContent!.length <= keep) continue;
    t.replace(
      i,
      changed(m, { reasoningContent: cutText(m.reasoningContent!, keep) + TRIM_MARKERS.reasoning }),
    );
  }
}

/** Phase 4: summarise old tool groups (all but the latest) into one plain assistant message. */
function summariseToolGroups(t: Trim): void {
  for (;;) {
    if (t.fits) return;
    const groups = toolGroups(t.list).slice(0, -1);
    const group = groups.find((g) => !range(g.start, g.end).some((i) => t.isProtected(i)));
    if (!group) return;
    const call = t.list[group.start];
    const results = t.list.slice(group.start + 1, group.end);
    const lines = call.toolCalls!.map((c) => {
      const result = results.find((r) => r.toolCallId === c.id)?.content;
      const text =
        result === undefined
          ? '(no result)'
          : cutText(result, LIMITS.groupResultChars) +
            (result.length > LIMITS.groupResultChars ? '…' : '');
      return `${c.function.name} → ${text}`;
    });
    const content = `${call.content ? `${call.content}\n` : ''}[earlier tool calls: ${lines.join(' | ')}]`;
    const summary: ModelMessage = { role: 'assistant', content, metadata: { summarised: true } };
    if (
      t.limits.count(summary) >=
      range(group.start, group.end).reduce((s, i) => s + t.limits.count(t.list[i]), 0)
    ) {
      return;
    }
    t.remove(group.start, group.end, summary);
  }
}

/** Phase 5: drop the oldest history, a whole tool group at a time. */
function dropOldest(t: Trim): void {
  for (let i = 1; i < t.list.length && !t.fits;) {
    const m = t.list[i];
    if (m.role === 'system' || t.isProtected(i)) {
      i++;
      continue;
    }
    let end = i + 1;
    if (m.role === 'assistant' && m.toolCalls?.length) {
      while (end < t.list.length && t.list[end].role === 'tool') end++;
      if (range(i, end).some((k) => t.isProtected(k))) {
        i = end;
        continue;
      }
    }
    t.remove(i, end);
  }
}

/** Phase 6, last: drop contributed system blocks, first to last. */
function dropSystemBlocks(t: Trim): void {
  for (let i = 1; i < t.list.length - 1 && !t.fits;) {
    if (t.list[i].role === 'system' && !t.isProtected(i) && !t.list[i].metadata?.kind) {
      t.remove(i, i + 1);
    } else i++;
  }
}

function range(start: number, end: number): number[] {
  return Array.from({ length: end - start }, (_, k) => start + k);
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
  const history = range(0, end).filter(
    (i) => list[i].role !== 'system' || list[i].metadata?.kind !== undefined,
  );
  let total = history.reduce((sum, i) => sum + options.count(list[i]), 0);
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
