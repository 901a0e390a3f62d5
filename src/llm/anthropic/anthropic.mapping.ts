import type {
  ChatRequest,
  ModelCapabilities,
  ModelMessage,
  ToolCall,
  ToolDefinition,
} from '../../contracts';
import { thinkingParam, type ThinkingCache, type ThinkingOptions } from './anthropic.thinking';

/** A content block as sent to the Messages API. */
export type WireBlock = Record<string, unknown> & { type: string };

/** A message as sent to the Messages API. */
export interface WireMessage {
  role: 'user' | 'assistant';
  content: WireBlock[];
}

/** Messages API request fields shared by `chat` and `stream`. */
export interface WireParams {
  model: string;
  max_tokens: number;
  messages: WireMessage[];
  system?: string;
  tools?: Array<{ name: string; description: string; input_schema: Record<string, unknown> }>;
  thinking?: { type: 'enabled'; budget_tokens: number } | { type: 'adaptive' };
}

/**
 * Request fields common to `chat` and `stream`; `thinking` when the request asks for it, the
 * model supports it and the kept thinking blocks allow it.
 */
export function toWireParams(
  request: ChatRequest,
  caps: ModelCapabilities,
  thinkingCache: ThinkingCache,
  options: ThinkingOptions,
): WireParams {
  const { system, messages } = toAnthropicMessages(request.messages, (m) =>
    thinkingCache.thinkingFor(m),
  );
  const params: WireParams = {
    model: request.model,
    max_tokens: request.maxTokens ?? caps.maxOutputTokens,
    messages,
  };
  if (system) params.system = system;
  if (request.tools?.length) params.tools = request.tools.map(toWireTool);
  if (request.think && caps.reasoning && thinkingCache.canThink(request.messages)) {
    const thinking = thinkingParam(options, params.max_tokens);
    if (thinking) params.thinking = thinking;
  }
  return params;
}

/** Model messages as Messages API `system` and `messages`. */
export function toAnthropicMessages(
  messages: readonly ModelMessage[],
  thinkingFor: (message: ModelMessage) => WireBlock[] | undefined = () => undefined,
): { system?: string; messages: WireMessage[] } {
  const system: string[] = [];
  const out: WireMessage[] = [];
  const push = (role: WireMessage['role'], blocks: WireBlock[]) => {
    if (!blocks.length) return;
    const last = out.at(-1);
    // Consecutive turns of one role form one message: tool results stay first, as required.
    if (last?.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        if (!out.length) {
          if (message.content.trim()) system.push(message.content);
        } else {
          push('user', textBlocks(`[system] ${message.content}`));
        }
        break;
      case 'tool':
        push('user', [
          {
            type: 'tool_result',
            tool_use_id: message.toolCallId ?? '',
            ...(message.content ? { content: message.content } : {}),
          },
        ]);
        break;
      case 'assistant': {
        const blocks: WireBlock[] = [];
        if (message.toolCalls?.length) blocks.push(...(thinkingFor(message) ?? []));
        blocks.push(...textBlocks(message.content));
        for (const call of message.toolCalls ?? []) {
          blocks.push({
            type: 'tool_use',
            id: call.id,
            name: call.function.name,
            input: parseArguments(call.function.arguments),
          });
        }
        push('assistant', blocks);
        break;
      }
      default:
        push('user', [
          ...(message.images ?? []).flatMap(imageBlock),
          ...textBlocks(message.content),
        ]);
    }
  }
  // The Messages API wants the conversation to open with a user turn.
  if (out[0]?.role === 'assistant') {
    out.unshift({ role: 'user', content: textBlocks('(earlier conversation omitted)') });
  }
  return { system: system.length ? system.join('\n\n') : undefined, messages: out };
}

/** A text block, or none for blank text (the API rejects empty text blocks). */
function textBlocks(text: string): WireBlock[] {
  return text.trim() ? [{ type: 'text', text }] : [];
}

/** Tool-call arguments as the `input` object; invalid or non-object JSON becomes `{}`. */
function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || '{}');
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** An image block for a data or http(s) URL; other URLs are left out. */
function imageBlock(url: string): WireBlock[] {
  const data = /^data:([^;,]+)((?:;[^;,]*)*),(.*)$/s.exec(url);
  if (data) {
    const mediaType = data[1].toLowerCase().replace('image/jpg', 'image/jpeg');
    if (!IMAGE_TYPES.has(mediaType)) return [];
    const base64 = /;base64/i.test(data[2])
      ? data[3]
      : Buffer.from(decodeURIComponent(data[3]), 'utf8').toString('base64');
    return [{ type: 'image', source: { type: 'base64', media_type: mediaType, data: base64 } }];
  }
  if (/^https?:\/\//i.test(url)) return [{ type: 'image', source: { type: 'url', url } }];
  return [];
}

/** A tool definition in the Messages API shape (`input_schema` must be an object schema). */
function toWireTool(tool: ToolDefinition) {
  const schema = tool.parameters ?? {};
  return {
    name: tool.name,
    description: tool.description,
    input_schema: { ...schema, type: 'object' },
  };
}

/** The text, thinking and tool calls of a non-streamed answer, in block order. */
export function readMessage(message: any): {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  thinking: WireBlock[];
} {
  let content = '';
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  const thinking: WireBlock[] = [];
  for (const block of Array.isArray(message?.content) ? message.content : []) {
    if (block?.type === 'text' && typeof block.text === 'string') content += block.text;
    if (block?.type === 'thinking') {
      if (typeof block.thinking === 'string') reasoning += block.thinking;
      thinking.push(block);
    }
    if (block?.type === 'redacted_thinking') thinking.push(block);
    if (block?.type === 'tool_use') {
      toolCalls.push({
        id: String(block.id),
        type: 'function',
        function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) },
      });
    }
  }
  return { content, reasoning, toolCalls, thinking };
}
