import type { ModelMessage, ToolCall } from '../../contracts';
import type { WireBlock, WireParams } from './anthropic.mapping';

/** Thinking blocks kept for tool-use loops (see `thinkingFor`). */
const THINKING_CACHE_SIZE = 512;
const MIN_THINKING_BUDGET = 1024;

/** The provider options that shape `thinking` (see `AnthropicProviderOptions`). */
export interface ThinkingOptions {
  thinkingBudgetTokens?: number;
  adaptiveThinking?: boolean;
}

/**
 * The `thinking` field of a call that may think: `adaptive`, or a budget of at most
 * `thinkingBudgetTokens` (16000 by default) and half of `max_tokens`, at least 1024; none when
 * that budget would not stay below `max_tokens`.
 */
export function thinkingParam(options: ThinkingOptions, maxTokens: number): WireParams['thinking'] {
  if (options.adaptiveThinking) return { type: 'adaptive' };
  const cap = options.thinkingBudgetTokens ?? 16_000;
  const budget = Math.max(MIN_THINKING_BUDGET, Math.min(cap, Math.floor(maxTokens / 2)));
  return budget < maxTokens ? { type: 'enabled', budget_tokens: budget } : undefined;
}

/**
 * Thinking blocks of recent tool-use answers, by the id of each of their tool calls: the API
 * requires them sent back with that answer while the tool loop lasts.
 */
export class ThinkingCache {
  private readonly blocks = new Map<string, WireBlock[]>();

  /** Keeps the thinking blocks of a tool-use answer for the next call of the tool loop. */
  remember(toolCalls: ToolCall[], thinking: WireBlock[]): void {
    if (!toolCalls.length || !thinking.length) return;
    for (const call of toolCalls) {
      this.blocks.delete(call.id);
      this.blocks.set(call.id, thinking);
    }
    while (this.blocks.size > THINKING_CACHE_SIZE) {
      this.blocks.delete(this.blocks.keys().next().value as string);
    }
  }

  /** Thinking blocks to send before the tool calls of an earlier answer, if kept. */
  thinkingFor(message: ModelMessage): WireBlock[] | undefined {
    const id = message.toolCalls?.[0]?.id;
    return id === undefined ? undefined : this.blocks.get(id);
  }

  /**
   * Whether thinking may be on: inside a tool loop (the conversation ends with tool results) the
   * API wants the loop's tool-use answer to start with its signed thinking blocks, which exist
   * only when this provider produced that answer with thinking on.
   */
  canThink(messages: ModelMessage[]): boolean {
    if (messages.at(-1)?.role !== 'tool') return true;
    for (let i = messages.length - 1; i >= 0; i--) {
      const message = messages[i];
      if (message.role === 'tool') continue;
      return (
        !(message.role === 'assistant' && message.toolCalls?.length) || !!this.thinkingFor(message)
      );
    }
    return true;
  }
}
