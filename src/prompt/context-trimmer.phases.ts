import type { ModelMessage } from '../contracts';
import type { TrimLimits } from './context-trimmer';
import { TURN_INPUT_FLAG } from './prompt.assembler';

/** Marker texts appended where content was cut. */
export const TRIM_MARKERS = {
  system: '\n[... reduced to fit the context window]',
  tool: '\n[... tool output truncated to fit the context window]',
  reasoning: '\n[... reasoning truncated]',
  continuation:
    'Earlier parts of this conversation were removed to fit the context window. Continue the task from what is still visible; ask the user if something essential is missing.',
} as const;

/** Character limits of the phases, and how many removals earn a continuation notice. */
export const LIMITS = {
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
export class Trim {
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
export function shrinkSystemBlocks(t: Trim): void {
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
export function truncateToolOutputs(t: Trim): void {
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
export function shortenReasoning(t: Trim): void {
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
export function summariseToolGroups(t: Trim): void {
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
export function dropOldest(t: Trim): void {
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
export function dropSystemBlocks(t: Trim): void {
  for (let i = 1; i < t.list.length - 1 && !t.fits;) {
    if (t.list[i].role === 'system' && !t.isProtected(i) && !t.list[i].metadata?.kind) {
      t.remove(i, i + 1);
    } else i++;
  }
}

/** The integers from `start` up to, not including, `end`. */
export function range(start: number, end: number): number[] {
  return Array.from({ length: end - start }, (_, k) => start + k);
}
