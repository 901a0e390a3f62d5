import type { ChatStreamChunk, ProviderUsage, ToolCall } from '../../contracts';
import type { ErrorContext } from '../provider-error';
import { malformed } from '../provider-error.sentences';
import type { WireBlock } from './anthropic.mapping';

/** Usage fields of `message_start` and `message_delta` (any may be missing or null). */
interface WireUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

/** Token usage gathered from `message_start` and `message_delta` (later values win). */
export class UsageTracker {
  private input?: number;
  private output?: number;
  private cacheCreation?: number;
  private cacheRead?: number;

  add(usage: WireUsage | null | undefined): void {
    if (!usage || typeof usage !== 'object') return;
    const num = (value: unknown) => (typeof value === 'number' ? value : undefined);
    this.input = num(usage.input_tokens) ?? this.input;
    this.output = num(usage.output_tokens) ?? this.output;
    this.cacheCreation = num(usage.cache_creation_input_tokens) ?? this.cacheCreation;
    this.cacheRead = num(usage.cache_read_input_tokens) ?? this.cacheRead;
  }

  /** Prompt tokens include cache reads and writes (all of them fill the context window). */
  result(): ProviderUsage | undefined {
    if (this.input === undefined && this.output === undefined) return undefined;
    const promptTokens =
      this.input === undefined
        ? undefined
        : this.input + (this.cacheCreation ?? 0) + (this.cacheRead ?? 0);
    const completionTokens = this.output;
    const totalTokens =
      promptTokens !== undefined && completionTokens !== undefined
        ? promptTokens + completionTokens
        : undefined;
    return { promptTokens, completionTokens, totalTokens };
  }
}

/** A content block being streamed. */
interface OpenBlock {
  type: string;
  /** tool_use: id, name and the input JSON so far. */
  id?: string;
  name?: string;
  json?: string;
  /** tool_use: the input of `content_block_start` (used when no JSON deltas follow). */
  input?: unknown;
  /** thinking: text and signature, kept to send back in tool loops. */
  thinking?: string;
  signature?: string;
  /** redacted_thinking: the opaque data. */
  data?: string;
}

/**
 * Turns Messages API stream events into stream chunks. Repeated `message_start`s of the same
 * message are ignored; a different message starting before the first one stopped is a
 * malformed stream.
 */
export class MessageStreamReader {
  readonly usage = new UsageTracker();
  private messageId?: string;
  private stopped = false;
  /** The answering model and its stop reason, as the stream reported them. */
  readonly meta: { responseModel?: string; finishReason?: string } = {};
  private readonly blocks = new Map<number, OpenBlock>();

  constructor(private readonly ctx: ErrorContext) {}

  /** Whether `message_stop` arrived. */
  get finished(): boolean {
    return this.stopped;
  }

  *read(raw: unknown): Generator<ChatStreamChunk> {
    const event = raw as Record<string, any>;
    if (!event || typeof event !== 'object' || this.stopped) return;
    switch (event.type) {
      case 'message_start': {
        const id = typeof event.message?.id === 'string' ? event.message.id : '';
        if (this.messageId !== undefined && id !== this.messageId) {
          throw malformed(this.ctx, 'a second message started before the first one ended');
        }
        if (this.messageId === undefined) this.usage.add(event.message?.usage);
        if (typeof event.message?.model === 'string') this.meta.responseModel = event.message.model;
        this.messageId = id;
        return;
      }
      case 'content_block_start':
        yield* this.startBlock(event.index, event.content_block ?? {});
        return;
      case 'content_block_delta':
        yield* this.delta(event.index, event.delta ?? {});
        return;
      case 'message_delta':
        this.usage.add(event.usage);
        if (typeof event.delta?.stop_reason === 'string') {
          this.meta.finishReason = event.delta.stop_reason;
        }
        return;
      case 'message_stop':
        if (this.messageId === undefined) {
          throw malformed(this.ctx, 'the message stopped before it started');
        }
        this.stopped = true;
        return;
      default:
        // content_block_stop, ping and future events carry nothing to assemble.
        return;
    }
  }

  /** Tool calls in block order; empty input is `{}`. */
  toolCalls(): ToolCall[] {
    return this.sorted()
      .filter((block) => block.type === 'tool_use')
      .map((block) => ({
        id: block.id ?? '',
        type: 'function' as const,
        function: { name: block.name ?? '', arguments: toolArguments(block) },
      }));
  }

  /** The thinking and redacted-thinking blocks, as the API wants them sent back. */
  thinkingBlocks(): WireBlock[] {
    return this.sorted().flatMap((block): WireBlock[] => {
      if (block.type === 'thinking' && block.signature) {
        return [{ type: 'thinking', thinking: block.thinking ?? '', signature: block.signature }];
      }
      if (block.type === 'redacted_thinking' && block.data) {
        return [{ type: 'redacted_thinking', data: block.data }];
      }
      return [];
    });
  }

  private sorted(): OpenBlock[] {
    return [...this.blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block);
  }

  private *startBlock(index: unknown, start: Record<string, any>): Generator<ChatStreamChunk> {
    if (this.messageId === undefined) {
      throw malformed(this.ctx, 'a content block came before message_start');
    }
    if (typeof index !== 'number') return;
    const block: OpenBlock = { type: String(start.type) };
    this.blocks.set(index, block);
    if (block.type === 'text' && typeof start.text === 'string' && start.text) {
      yield { contentDelta: start.text };
    } else if (block.type === 'thinking') {
      block.thinking = typeof start.thinking === 'string' ? start.thinking : '';
      block.signature = typeof start.signature === 'string' ? start.signature : '';
      if (block.thinking) yield { reasoningDelta: block.thinking };
    } else if (block.type === 'redacted_thinking') {
      block.data = typeof start.data === 'string' ? start.data : '';
    } else if (block.type === 'tool_use') {
      block.id = typeof start.id === 'string' ? start.id : '';
      block.name = typeof start.name === 'string' ? start.name : '';
      block.json = '';
      block.input = start.input;
    }
  }

  private *delta(index: unknown, delta: Record<string, any>): Generator<ChatStreamChunk> {
    const block = typeof index === 'number' ? this.blocks.get(index) : undefined;
    if (!block) throw malformed(this.ctx, 'a delta came for a block that never started');
    switch (delta.type) {
      case 'text_delta':
        if (typeof delta.text === 'string' && delta.text) yield { contentDelta: delta.text };
        return;
      case 'thinking_delta':
        if (typeof delta.thinking === 'string' && delta.thinking) {
          block.thinking = (block.thinking ?? '') + delta.thinking;
          yield { reasoningDelta: delta.thinking };
        }
        return;
      case 'signature_delta':
        if (typeof delta.signature === 'string') block.signature = delta.signature;
        return;
      case 'input_json_delta':
        if (typeof delta.partial_json === 'string')
          block.json = (block.json ?? '') + delta.partial_json;
        return;
      default:
        return;
    }
  }
}

/** The JSON arguments of a streamed tool_use block. */
function toolArguments(block: OpenBlock): string {
  if (block.json?.trim()) return block.json;
  const input = block.input;
  if (input && typeof input === 'object' && Object.keys(input).length) return JSON.stringify(input);
  return '{}';
}
