import {
  TurnAbortedError,
  type ChatRequest,
  type ChatResponse,
  type ModelMessage,
  type ProviderUsage,
  type StreamEvent,
  type TokenUsageEvent,
  type ToolCall,
} from '../../../contracts';
import type { ModelCallInfo } from '../../instrumentation';
import { budgetOf, type SentCall } from '../context-fit';
import type { EnginePorts } from '../ports';
import { historyLimitOf, type TurnState } from '../turn-state';

/** One model call's answer plus what the provider reported. */
export interface StepResponse extends ChatResponse {
  usage?: ProviderUsage;
}

/** What calling the model uses. */
export type ModelStepPorts = Pick<EnginePorts, 'events' | 'instrumentation'> & {
  options: Pick<EnginePorts['options'], 'llmIdleTimeoutMs'>;
};

/**
 * Calls the turn's model once, through the instrumentation seam, and records the call's usage
 * (`token:usage`, I12) as soon as it answered. Streams when the provider can (each chunk goes out
 * as `outbound:stream` with the turn id); otherwise calls `chat` once and sends the whole answer
 * as one chunk (I16). A stop ends the call with `TurnAbortedError`.
 */
export async function callModel(
  ports: ModelStepPorts & UsageStepPorts,
  state: TurnState,
  sent: SentCall,
): Promise<StepResponse> {
  const { messages, tools } = sent;
  const { provider, ref, capabilities } = state.model!;
  const signal = state.turn.signal;
  const request: ChatRequest = {
    model: ref.model,
    messages: wireMessages(messages, capabilities.vision),
    tools: tools.length && capabilities.tools ? tools : undefined,
    maxTokens: capabilities.maxOutputTokens,
    think: state.settings?.think,
    capabilities,
    idleTimeoutMs: ports.options.llmIdleTimeoutMs,
    signal,
  };
  const info: ModelCallInfo = {
    sessionId: state.sessionId,
    turnId: state.turn.id,
    provider: provider.id,
    model: ref.model,
    call: state.calls + 1,
    signal,
    messages,
  };
  const { turn } = state;
  try {
    if (turn.aborted) throw new TurnAbortedError();
    return await ports.instrumentation.modelCall(info, async () => {
      const response = provider.stream
        ? await consume(ports, state, request)
        : await answerWhole(ports, state, request);
      if (turn.aborted) throw new TurnAbortedError();
      info.usage = recordCall(ports, state, sent, response);
      return response;
    });
  } catch (error) {
    if (turn.aborted) throw new TurnAbortedError();
    throw error;
  }
}

/** I16: a provider without streaming, its whole answer sent as one chunk. */
async function answerWhole(
  ports: ModelStepPorts,
  state: TurnState,
  request: ChatRequest,
): Promise<StepResponse> {
  const response = await state.model!.provider.chat(request);
  if (request.signal?.aborted) throw new TurnAbortedError();
  if (response.content || response.reasoningContent) {
    emitChunk(ports, state, response.content || undefined, response.reasoningContent || undefined);
  }
  return response;
}

/** Streams the answer, sending each chunk as it comes and folding them into one answer. */
async function consume(
  ports: ModelStepPorts,
  state: TurnState,
  request: ChatRequest,
): Promise<StepResponse> {
  let content = '';
  let reasoning = '';
  let toolCalls: ToolCall[] | undefined;
  let usage: ProviderUsage | undefined;
  let responseModel: string | undefined;
  let finishReason: string | undefined;
  const { turn } = state;
  for await (const chunk of state.model!.provider.stream!(request)) {
    if (turn.aborted) throw new TurnAbortedError();
    if (chunk.responseModel) responseModel = chunk.responseModel;
    if (chunk.finishReason) finishReason = chunk.finishReason;
    if (chunk.contentDelta) content += chunk.contentDelta;
    if (chunk.reasoningDelta) reasoning += chunk.reasoningDelta;
    if (chunk.contentDelta || chunk.reasoningDelta) {
      emitChunk(ports, state, chunk.contentDelta, chunk.reasoningDelta);
    }
    if (chunk.toolCalls?.length) toolCalls = chunk.toolCalls;
    if (chunk.usage) usage = { ...usage, ...chunk.usage };
  }
  // The timeline's text and the answer are built from the same deltas: keep one string, not
  // two equal ones (the reply is persisted with both).
  const last = state.segments[state.segments.length - 1];
  if (last?.type === 'text' && last.content === content) last.content = content;
  const response: StepResponse = { content, reasoningContent: reasoning || undefined, toolCalls };
  response.usage = usage;
  if (responseModel) response.responseModel = responseModel;
  if (finishReason) response.finishReason = finishReason;
  return response;
}

function emitChunk(
  ports: ModelStepPorts,
  state: TurnState,
  delta?: string,
  reasoningDelta?: string,
): void {
  if (reasoningDelta) state.addStreamed('reasoning_text', reasoningDelta);
  if (delta) state.addStreamed('text', delta);
  // One literal with the fields the chunk has, in the same order (no spread of a temporary
  // object, no field added after the literal: that would cost a separate property store).
  const { turn } = state;
  const { sessionId } = state;
  const turnId = turn.id;
  const seq = ++turn.seq;
  let event: StreamEvent;
  if (!reasoningDelta) event = { sessionId, turnId, seq, delta };
  else if (!delta) event = { sessionId, turnId, seq, reasoningDelta };
  else event = { sessionId, turnId, seq, delta, reasoningDelta };
  ports.events.emit('outbound:stream', event);
}

/**
 * The messages as sent: images only when the model accepts them. The list itself (the call's
 * own) when no message carries images the model does not take.
 */
function wireMessages(messages: ModelMessage[], acceptsImages: boolean): ModelMessage[] {
  if (acceptsImages || !messages.some((m) => m.images)) return messages;
  return messages.map((m) => wireMessage(m, acceptsImages));
}

/** The message as sent: images only when the model accepts them. */
function wireMessage(message: ModelMessage, acceptsImages: boolean): ModelMessage {
  if (!message.images || acceptsImages) return message;
  const { images: _images, ...rest } = message;
  return rest;
}

/** What recording a call's usage uses. */
export type UsageStepPorts = Pick<EnginePorts, 'events' | 'usage' | 'estimator' | 'options'>;

/**
 * After a successful call: token bookkeeping and the `token:usage` event (U1-U6), emitted before
 * `agent:llm:after` so a throwing middleware cannot suppress it (I12).
 */
export function recordCall(
  ports: UsageStepPorts,
  state: TurnState,
  sent: SentCall,
  response: StepResponse,
): TokenUsageEvent {
  const { capabilities } = state.model!;
  const usage = response.usage;
  if (usage?.promptTokens) state.promptTokens = usage.promptTokens;
  if (usage?.completionTokens) state.completionTokens += usage.completionTokens;
  if (response.reasoningContent) state.reasoning.push(response.reasoningContent);
  state.calls++;
  const event = ports.usage.buildEvent({
    sessionId: state.sessionId,
    turnId: state.turn.id,
    platform: state.platform,
    messages: sent.messages,
    tools: sent.tools,
    encoding: state.encodingOf(ports.estimator),
    contextWindow: capabilities.contextWindow,
    maxTokens: capabilities.maxOutputTokens,
    tokenBudget: budgetOf(ports, state),
    reportedPromptTokens: usage?.promptTokens,
    trimmed: state.trimmed,
    untrimmedHistory: sent.untrimmedHistory,
    bucketed: sent.bucketed,
    historyMessages: state.historyMessages,
    historyLimit: historyLimitOf(ports.options, state),
  });
  state.lastUsage = event;
  ports.events.emit('token:usage', event);
  ports.usage.noteUsage(event);
  return event;
}
