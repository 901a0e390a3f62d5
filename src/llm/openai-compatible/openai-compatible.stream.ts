import { randomUUID } from 'node:crypto';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ChatResponse, ChatStreamChunk, ProviderUsage, ToolCall } from '../../contracts';

/** The delta of a streamed choice, including fields that OpenAI-compatible servers add. */
interface WireDelta {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: WireToolCallDelta[] | null;
}

/** One tool-call delta as servers really send it (`index`, `id` and `type` may be missing). */
interface WireToolCallDelta {
  index?: number;
  id?: string | null;
  function?: { name?: string | null; arguments?: unknown } | null;
}

/** Wire usage, as in chat-completions answers. */
interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

/** The stream chunks of one wire chunk; tool-call deltas go to `assembler`. */
export function* readChunk(
  chunk: ChatCompletionChunk,
  assembler: ToolCallAssembler,
): Generator<ChatStreamChunk> {
  const delta = chunk.choices?.[0]?.delta as WireDelta | undefined;
  if (delta) {
    const reasoning = firstText(delta.reasoning_content, delta.reasoning);
    if (reasoning) yield { reasoningDelta: reasoning };
    const parts = splitContent(delta.content);
    if (parts.reasoning) yield { reasoningDelta: parts.reasoning };
    if (parts.content) yield { contentDelta: parts.content };
    assembler.add(delta.tool_calls);
  }
  if (chunk.usage) yield { usage: toUsage(chunk.usage) };
}

/** A whole (non-streamed) completion as a `ChatResponse`. */
export function readCompletion(completion: ChatCompletion): ChatResponse {
  const message: Record<string, any> = completion.choices?.[0]?.message ?? {};
  const parts = splitContent(message.content);
  const reasoning = firstText(message.reasoning_content, message.reasoning) + parts.reasoning;
  const assembler = new ToolCallAssembler();
  assembler.add(message.tool_calls);
  const toolCalls = assembler.result();
  return {
    content: parts.content,
    reasoningContent: reasoning || undefined,
    toolCalls: toolCalls.length ? toolCalls : undefined,
    usage: completion.usage ? toUsage(completion.usage) : undefined,
    ...(completion.model ? { responseModel: completion.model } : {}),
    ...(completion.choices?.[0]?.finish_reason
      ? { finishReason: completion.choices[0].finish_reason }
      : {}),
  };
}

/** The first non-empty string among `values`, else `''`. */
function firstText(...values: unknown[]): string {
  for (const value of values) if (typeof value === 'string' && value) return value;
  return '';
}

/**
 * Text and reasoning of a wire `content`: a string, or (Mistral / Magistral) an array of parts
 * where `{type:'text', text}` is text and `{type:'thinking', thinking:[{type:'text', text}]}` is
 * reasoning.
 */
function splitContent(content: unknown): { content: string; reasoning: string } {
  if (typeof content === 'string') return { content, reasoning: '' };
  const out = { content: '', reasoning: '' };
  if (!Array.isArray(content)) return out;
  for (const part of content as Array<Record<string, any>>) {
    if (part?.type === 'text' && typeof part.text === 'string') out.content += part.text;
    if (part?.type === 'thinking') out.reasoning += thinkingText(part.thinking);
  }
  return out;
}

/** The text of a `thinking` part: a string or an array of text parts. */
function thinkingText(thinking: unknown): string {
  if (typeof thinking === 'string') return thinking;
  if (!Array.isArray(thinking)) return '';
  return thinking.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
}

/** Wire usage to `ProviderUsage`; a missing total is the sum of the two parts. */
function toUsage(usage: WireUsage): ProviderUsage {
  const promptTokens = usage.prompt_tokens;
  const completionTokens = usage.completion_tokens;
  const totalTokens =
    usage.total_tokens ??
    (promptTokens !== undefined && completionTokens !== undefined
      ? promptTokens + completionTokens
      : undefined);
  return { promptTokens, completionTokens, totalTokens };
}

/**
 * Assembles tool calls from deltas keyed by `index` (the position in the delta list when a
 * server omits it). Empty ids and names never overwrite real ones; arguments are appended.
 */
export class ToolCallAssembler {
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();

  add(deltas: WireToolCallDelta[] | null | undefined): void {
    if (!Array.isArray(deltas)) return;
    deltas.forEach((delta, position) => {
      const index = typeof delta.index === 'number' ? delta.index : position;
      let call = this.calls.get(index);
      if (!call) this.calls.set(index, (call = { id: '', name: '', arguments: '' }));
      if (delta.id) call.id = delta.id;
      if (delta.function?.name) call.name = delta.function.name;
      const args = delta.function?.arguments;
      if (typeof args === 'string') call.arguments += args;
      else if (args != null) call.arguments += JSON.stringify(args);
    });
  }

  /** The calls in index order; missing ids are generated, empty arguments become `{}`. */
  result(): ToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({
        id: call.id || `call_${randomUUID().replace(/-/g, '')}`,
        type: 'function' as const,
        function: { name: call.name, arguments: call.arguments || '{}' },
      }));
  }
}
