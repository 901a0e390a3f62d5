import {
  TurnAbortedError,
  type ChatRequest,
  type ChatResponse,
  type ModelMessage,
  type ProviderUsage,
  type ToolCall,
  type ToolDefinition,
} from '../../contracts';
import type { TurnDeps } from './turn-deps';
import type { TurnState } from './turn-state';

/** One model call's answer plus what the provider reported. */
export interface StepResponse extends ChatResponse {
  usage?: ProviderUsage;
}

/**
 * Calls the turn's model once. Streams when the provider can (each chunk goes out as
 * `outbound:stream` with the turn id); otherwise calls `chat` once and sends the whole answer as
 * one chunk (I16). A stop ends the call with `TurnAbortedError`.
 */
export async function callModel(
  deps: TurnDeps,
  state: TurnState,
  messages: ModelMessage[],
  tools: ToolDefinition[],
): Promise<StepResponse> {
  const { provider, ref, capabilities } = state.model!;
  const signal = state.turn.signal;
  const request: ChatRequest = {
    model: ref.model,
    messages: messages.map((m) => wireMessage(m, capabilities.vision)),
    tools: tools.length && capabilities.tools ? tools : undefined,
    maxTokens: capabilities.maxOutputTokens,
    think: state.settings?.think,
    capabilities,
    signal,
  };
  const emit = (delta?: string, reasoningDelta?: string) => {
    if (reasoningDelta) state.addStreamed('reasoning_text', reasoningDelta);
    if (delta) state.addStreamed('text', delta);
    deps.events.emit('outbound:stream', {
      sessionId: state.sessionId,
      turnId: state.turn.id,
      ...(delta ? { delta } : {}),
      ...(reasoningDelta ? { reasoningDelta } : {}),
    });
  };
  try {
    if (signal.aborted) throw new TurnAbortedError();
    if (!provider.stream) {
      const response = await provider.chat(request);
      if (signal.aborted) throw new TurnAbortedError();
      if (response.content || response.reasoningContent) {
        emit(response.content || undefined, response.reasoningContent || undefined);
      }
      return response;
    }
    let content = '';
    let reasoning = '';
    let toolCalls: ToolCall[] | undefined;
    let usage: ProviderUsage | undefined;
    for await (const chunk of provider.stream(request)) {
      if (signal.aborted) throw new TurnAbortedError();
      if (chunk.contentDelta) content += chunk.contentDelta;
      if (chunk.reasoningDelta) reasoning += chunk.reasoningDelta;
      if (chunk.contentDelta || chunk.reasoningDelta)
        emit(chunk.contentDelta, chunk.reasoningDelta);
      if (chunk.toolCalls?.length) toolCalls = chunk.toolCalls;
      if (chunk.usage) usage = { ...usage, ...chunk.usage };
    }
    if (signal.aborted) throw new TurnAbortedError();
    return { content, reasoningContent: reasoning || undefined, toolCalls, usage };
  } catch (error) {
    if (signal.aborted) throw new TurnAbortedError();
    throw error;
  }
}

/** The message as sent: images only when the model accepts them. */
function wireMessage(message: ModelMessage, acceptsImages: boolean): ModelMessage {
  if (!message.images || acceptsImages) return message;
  const { images: _images, ...rest } = message;
  return rest;
}
