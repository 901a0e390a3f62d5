import {
  TurnAbortedError,
  type LlmBeforeContext,
  type LlmAfterContext,
  type ModelMessage,
  type ToolDefinition,
} from '../../contracts';
import { budgetOf, fitCall } from './context-fit';
import { callModel, type StepResponse } from './model-step';
import { runToolCalls } from './tool-executor';
import { joinPending } from './turn-inputs';
import type { LaneHandle, TurnDeps } from './turn-deps';
import type { TurnState } from './turn-state';

/** What one model call was sent. */
export interface SentCall {
  messages: ModelMessage[];
  tools: ToolDefinition[];
  /** U4 figure of this call. */
  untrimmedHistory: number;
}

/** The model's final answer and what its call was sent (the base of format retries). */
export interface FinalAnswer {
  response: StepResponse;
  sent: SentCall;
}

/** Throws `TurnAbortedError` when the turn was stopped. */
export function throwIfAborted(state: TurnState): void {
  if (state.turn.signal.aborted) throw new TurnAbortedError();
}

/**
 * The model/tool loop of a turn. Each iteration: pending insertions join (I2), contributions are
 * materialised (R1), `agent:llm:before` runs, the model is called, `token:usage` goes out
 * (I12), `agent:llm:after` runs; tool calls are executed and persisted and the loop goes on.
 * It ends with the first answer without tool calls; once `maxToolIterations` calls with tool
 * results were made, the model is asked once more without tools for a final answer.
 */
export async function runSteps(
  deps: TurnDeps,
  state: TurnState,
  lane: LaneHandle,
): Promise<FinalAnswer> {
  const maxIterations = state.settings?.maxToolIterations ?? deps.options.maxToolIterations;
  let iterations = 0;
  for (;;) {
    throwIfAborted(state);
    await joinPending(deps, state, lane);
    throwIfAborted(state);
    const offerTools = iterations < maxIterations;
    const sent = await prepareCall(deps, state, offerTools ? deps.tools.definitions() : []);
    const response = await callModel(deps, state, sent.messages, sent.tools);
    recordCall(deps, state, sent, response);
    const after: LlmAfterContext = {
      response,
      messages: sent.messages,
      sessionId: state.sessionId,
      turnId: state.turn.id,
    };
    await deps.hooks.run('agent:llm:after', after);
    const answer = after.response;
    // Continue only when tools were offered and the model asked for some.
    if (!(offerTools && sent.tools.length && answer.toolCalls?.length)) {
      lane.closeInsertions();
      return { response: answer, sent };
    }
    iterations++;
    const group = await runToolCalls(deps, state, {
      content: answer.content ?? '',
      reasoningContent: answer.reasoningContent,
      toolCalls: answer.toolCalls,
    });
    state.working.push(...group);
  }
}

/** Materialises contributions into the working list and runs `agent:llm:before` (R1, H2, H3). */
async function prepareCall(
  deps: TurnDeps,
  state: TurnState,
  tools: ToolDefinition[],
): Promise<SentCall> {
  const { turn } = state;
  state.working = await deps.prompts.materialise(state.working, {
    sessionId: state.sessionId,
    platform: state.platform,
    inputs: turn.inputs,
    signal: turn.signal,
    dryRun: false,
  });
  const ctx: LlmBeforeContext = {
    messages: [...state.working],
    tools: [...tools],
    acceptsImages: state.acceptsImages,
    sessionId: state.sessionId,
    ...(turn.source !== undefined ? { source: turn.source } : {}),
    turnId: turn.id,
    platform: state.platform,
    inputs: turn.inputs,
    model: state.model!.ref,
    signal: turn.signal,
  };
  await deps.hooks.run('agent:llm:before', ctx);
  throwIfAborted(state);
  // Large uncached texts are counted in worker threads first, so the synchronous counting of
  // the budget and usage below only hits the cache and never stalls other sessions.
  await deps.estimator.countMessagesAsync(ctx.messages, state.encodingOf(deps.estimator));
  const fitted = fitCall(deps, state, ctx.messages, ctx.tools, state.calls === 0);
  return { messages: fitted.messages, tools: ctx.tools, untrimmedHistory: fitted.untrimmedHistory };
}

/**
 * After a successful call: token bookkeeping and the `token:usage` event (U1-U6), emitted before
 * `agent:llm:after` so a throwing middleware cannot suppress it (I12).
 */
export function recordCall(
  deps: TurnDeps,
  state: TurnState,
  sent: SentCall,
  response: StepResponse,
): void {
  const { capabilities } = state.model!;
  const usage = response.usage;
  if (usage?.promptTokens) state.promptTokens = usage.promptTokens;
  if (usage?.completionTokens) state.completionTokens += usage.completionTokens;
  if (response.reasoningContent) state.reasoning.push(response.reasoningContent);
  state.calls++;
  const encoding = state.encodingOf(deps.estimator);
  const event = deps.usage.buildEvent({
    sessionId: state.sessionId,
    turnId: state.turn.id,
    platform: state.platform,
    messages: sent.messages,
    tools: sent.tools,
    encoding,
    contextWindow: capabilities.contextWindow,
    maxTokens: capabilities.maxOutputTokens,
    tokenBudget: budgetOf(deps, state),
    reportedPromptTokens: usage?.promptTokens,
    trimmed: state.trimmed,
    untrimmedHistory: sent.untrimmedHistory,
    historyMessages: state.historyMessages,
    historyLimit: historyLimitOf(deps, state),
  });
  deps.events.emit('token:usage', event);
  deps.usage.noteUsage(event);
}

/** The session's history count limit (U6). */
export function historyLimitOf(deps: TurnDeps, state: TurnState): number {
  return state.settings?.historyLimit ?? deps.options.historyLimit;
}
