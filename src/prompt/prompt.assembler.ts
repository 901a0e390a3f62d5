import { Injectable, Logger } from '@nestjs/common';
import { isThenable, type ContributionBucket, type ModelMessage } from '../contracts';
import type {
  ContributionBlockMetadata,
  ContributionOutput,
  PromptAnchor,
  PromptContributionSpec,
  PromptView,
  RegisteredContribution,
} from './prompt.types';

/** Anchors in the order they are placed; each sees the list as the earlier ones left it. */
const ANCHORS: readonly PromptAnchor[] = [
  'identity',
  'knowledge',
  'context',
  'turn-context',
  'turn-hint',
];

const DEFAULT_ANCHOR: Record<ContributionBucket, PromptAnchor> = {
  persona: 'identity',
  skills: 'knowledge',
  memorySummary: 'context',
  subtask: 'context',
  systemOther: 'context',
  memoryVector: 'turn-context',
  platform: 'turn-hint',
};

/** Metadata flag on model messages that are this turn's inputs (for `turn-context`). */
export const TURN_INPUT_FLAG = 'turnInput';

/**
 * The `agent:prompt` contribution point (R1-R3): registry of contributions and the assembler
 * that materialises them into the message list before `agent:llm:before`.
 */
@Injectable()
export class PromptAssembler {
  private readonly logger = new Logger('PromptAssembler');
  private readonly byKey = new Map<string, RegisteredContribution>();
  private sorted: RegisteredContribution[] | undefined;

  /**
   * Registers a contribution owned by `owner` (a module instance id); returns a function that
   * withdraws it. Throws when the global key is taken or the key is malformed.
   */
  register(spec: PromptContributionSpec, owner = 'runtime'): () => void {
    if (!spec.key || spec.key.includes('/')) {
      throw new Error(`Prompt contribution key "${spec.key}" must be non-empty and contain no "/"`);
    }
    const globalKey = `${owner}/${spec.key}`;
    if (this.byKey.has(globalKey)) {
      throw new Error(`Prompt contribution "${globalKey}" is registered twice`);
    }
    const registered: RegisteredContribution = {
      key: spec.key,
      bucket: spec.bucket,
      priority: spec.priority ?? 0,
      anchor: spec.anchor ?? DEFAULT_ANCHOR[spec.bucket],
      timeoutMs: spec.timeoutMs ?? 10_000,
      globalKey,
      owner,
      build: spec.build,
    };
    this.byKey.set(globalKey, registered);
    this.sorted = undefined;
    return () => {
      if (this.byKey.get(globalKey) === registered) {
        this.byKey.delete(globalKey);
        this.sorted = undefined;
      }
    };
  }

  /** Withdraws every contribution of an owner; returns how many. */
  removeOwner(owner: string): number {
    let removed = 0;
    for (const [key, c] of this.byKey) {
      if (c.owner === owner) {
        this.byKey.delete(key);
        removed++;
      }
    }
    if (removed) this.sorted = undefined;
    return removed;
  }

  /** Registered contributions, by priority then global key. */
  list(): readonly RegisteredContribution[] {
    this.sorted ??= [...this.byKey.values()].sort(
      (a, b) => a.priority - b.priority || (a.globalKey < b.globalKey ? -1 : 1),
    );
    return this.sorted;
  }

  /** The contribution with this global key, if registered. */
  get(globalKey: string): RegisteredContribution | undefined {
    return this.byKey.get(globalKey);
  }

  /**
   * Returns a new list with the blocks of every contribution not yet in `messages` inserted at
   * its anchor. Builds run in parallel on one view; a build that throws or times out is absent
   * this time (and tried again on the next call of the turn), never fatal.
   */
  async materialise(
    messages: readonly ModelMessage[],
    view: Omit<PromptView, 'messages'>,
  ): Promise<ModelMessage[]> {
    const present = new Set<unknown>();
    for (const m of messages) if (m.role === 'system') present.add(m.metadata?.injector);
    const pending = this.list().filter((c) => !present.has(c.globalKey));
    if (!pending.length) return [...messages];
    // R2: a snapshot, not the live list: builds run in parallel and must not change the prompt.
    // Made on first read only (most contributions never look at the messages).
    const items = [...messages];
    let snapshot: readonly ModelMessage[] | undefined;
    const read = () => (snapshot ??= Object.freeze(items.map((m) => Object.freeze({ ...m }))));
    const viewOf = () =>
      Object.defineProperty({ ...view }, 'messages', { enumerable: true, get: read }) as PromptView;
    const outputs = await Promise.all(pending.map((c) => this.buildOne(c, viewOf())));
    const list = [...messages];
    for (const anchor of ANCHORS) {
      const blocks: ModelMessage[] = [];
      pending.forEach((c, i) => {
        if (c.anchor !== anchor) return;
        for (const content of outputs[i]) {
          const metadata: ContributionBlockMetadata = { injector: c.globalKey, bucket: c.bucket };
          blocks.push({ role: 'system', content, metadata: { ...metadata } });
        }
      });
      if (!blocks.length) continue;
      const at = insertionIndex(list, anchor);
      if (at >= 0) list.splice(at, 0, ...blocks);
    }
    return list;
  }

  private async buildOne(c: RegisteredContribution, view: PromptView): Promise<string[]> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const built = c.build(view);
      // Texts returned at once (no promise) are there: no timeout to race them. The timer starts
      // after the build (unlike a tool's): which timeout wins only changes the logged reason.
      let output: ContributionOutput;
      if (!isThenable(built)) output = built;
      else if (!c.timeoutMs) output = await built;
      else {
        output = await Promise.race([
          Promise.resolve(built),
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`timed out after ${c.timeoutMs} ms`)),
              c.timeoutMs,
            );
          }),
        ]);
      }
      const texts = output == null ? [] : Array.isArray(output) ? output : [output];
      return texts.filter((t): t is string => typeof t === 'string' && t.length > 0);
    } catch (error) {
      this.logger.warn(`Contribution ${c.globalKey} skipped: ${(error as Error).message}`);
      return [];
    } finally {
      if (timer) clearTimeout(timer);
    }
  }
}

function insertionIndex(list: readonly ModelMessage[], anchor: PromptAnchor): number {
  const lastUser = findLastIndex(list, (m) => m.role === 'user');
  switch (anchor) {
    case 'identity': {
      const firstSystem = list.findIndex((m) => m.role === 'system');
      return firstSystem < 0 ? 0 : firstSystem + 1;
    }
    case 'knowledge':
    case 'context': {
      const firstOther = list.findIndex((m) => m.role !== 'system');
      return firstOther < 0 ? list.length : firstOther;
    }
    case 'turn-context': {
      const firstInput = list.findIndex((m) => m.metadata?.[TURN_INPUT_FLAG] === true);
      if (firstInput >= 0) return firstInput;
      return lastUser >= 0 ? lastUser : list.length;
    }
    case 'turn-hint':
      return lastUser;
  }
}

function findLastIndex<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i])) return i;
  return -1;
}
