import type {
  ChatCompletionContentPart,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { ChatRequest, ModelMessage, ToolDefinition } from '../../contracts';

/** Chat-completions request fields shared by `chat` and `stream`. */
export type BaseParams = Omit<ChatCompletionCreateParamsBase, 'stream'>;

/**
 * Request fields common to `chat` and `stream`; `think` asks for high reasoning effort (only
 * for a model that reasons).
 */
export function toWireParams(request: ChatRequest, think: boolean): BaseParams {
  const params: BaseParams = {
    model: request.model,
    messages: request.messages.map(toWireMessage),
  };
  if (request.tools?.length) params.tools = request.tools.map(toWireTool);
  if (request.maxTokens !== undefined) params.max_tokens = request.maxTokens;
  if (think) params.reasoning_effort = 'high';
  return params;
}

/** A model message in the chat-completions wire shape (`metadata` and reasoning are dropped). */
function toWireMessage(message: ModelMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId ?? '', content: message.content };
    case 'assistant':
      if (!message.toolCalls?.length) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content || null,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.function.name, arguments: call.function.arguments },
        })),
      };
    default:
      return { role: 'user', content: userContent(message) };
  }
}

/** A user message's content: a string, or text and image parts when it has images. */
function userContent(message: ModelMessage): string | ChatCompletionContentPart[] {
  if (!message.images?.length) return message.content;
  const parts: ChatCompletionContentPart[] = [];
  if (message.content) parts.push({ type: 'text', text: message.content });
  for (const url of message.images) parts.push({ type: 'image_url', image_url: { url } });
  return parts;
}

/** A tool definition in the chat-completions wire shape. */
function toWireTool(tool: ToolDefinition): ChatCompletionTool {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  };
}
