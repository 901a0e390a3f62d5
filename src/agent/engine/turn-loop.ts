import { TurnAbortedError, type LlmAfterContext } from '../../contracts';
import { fitCall, type SentCall } from './context-fit';
import { joinPending, type InputStepPorts } from './phases/input-step';
import {
  callModel,
  type ModelStepPorts,
  type StepResponse,
  type UsageStepPorts,
} from './phases/model-step';
import { prepareCall, type PromptStepPorts } from './phases/prompt-step';
import { nextAttempt, persistDraft, replyContext, reviewReply } from './phases/reply-step';
import { runToolCalls, type ToolStepPorts } from './phases/tool-step';
import type { LaneHandle } from './ports';
import type { FinalReply, TurnState } from './turn-state';

/** What the loop hands its phases: the union of their reach, nothing more. */
export type LoopPorts = InputStepPorts &
  PromptStepPorts &
  ModelStepPorts &
  UsageStepPorts &
  ToolStepPorts;

/** The model's final answer and what its call was sent (the base of format retries). */
export interface FinalAnswer {
  response: StepResponse;
  sent: SentCall;
}

/** The last allowed model call still asked for tools and said nothing: the turn ends `error`. */
export class ToolRoundsExhaustedError extends Error {
  constructor(readonly rounds: number) {
    super(
      `the model still asked for tools after ${rounds} rounds of tool calls, the most this session allows`,
    );
  }
}

/** Throws `TurnAbortedError` when the turn was stopped. */
export function throwIfAborted(state: TurnState): void {
  if (state.turn.aborted) throw new TurnAbortedError();
}

/**
 * The model/tool loop of a turn, calling its phases in order. Each iteration: pending insertions
 * join (I2), the call is prepared (contributions, `agent:llm:before`, fitting; R1), the model is
 * called, `token:usage` goes out (I12), `agent:llm:after` runs; tool calls are executed and
 * persisted and the loop goes on. It ends with the first answer without tool calls; once
 * `maxToolIterations` calls with tool results were made, the model is asked once more without
 * tools for a final answer.
 */
export async function runSteps(
  ports: LoopPorts,
  state: TurnState,
  lane: LaneHandle,
): Promise<FinalAnswer> {
  const maxIterations = state.settings?.maxToolIterations ?? ports.options.maxToolIterations;
  let iterations = 0;
  for (;;) {
    throwIfAborted(state);
    await joinPending(ports, state, lane);
    throwIfAborted(state);
    const offerTools = iterations < maxIterations;
    const sent = await prepareCall(ports, state, offerTools ? ports.tools.definitions() : []);
    const response = await callModel(ports, state, sent);
    const after: LlmAfterContext = {
      response,
      messages: sent.messages,
      sessionId: state.sessionId,
      turnId: state.turn.id,
    };
    await ports.hooks.run('agent:llm:after', after);
    const answer = after.response;
    // Continue while tool rounds are left and the model asked for tools (also for tools it was
    // not offered: each gets an unknown-tool result and the model sees it, within the limit).
    if (!answer.toolCalls?.length || !offerTools) {
      lane.closeInsertions();
      if (answer.toolCalls?.length && !answer.content?.trim()) {
        throw new ToolRoundsExhaustedError(maxIterations);
      }
      return { response: answer, sent };
    }
    iterations++;
    const offered = new Set(sent.tools.map((t) => t.name));
    const group = await runToolCalls(
      ports,
      state,
      {
        content: answer.content ?? '',
        reasoningContent: answer.reasoningContent,
        toolCalls: answer.toolCalls,
      },
      offered,
    );
    state.working.push(...group);
  }
}

/**
 * The reply with its retry protocol: the reply step reviews each answer; a retry is one more
 * model call without tools, with its own `token:usage` (U1) and no insertions (I2), trimmed into
 * a copy so its scaffolding never counts as history (I15). In rooms each discarded draft is
 * persisted with `sent: false` (P2).
 */
export async function finaliseReply(
  ports: LoopPorts,
  state: TurnState,
  final: FinalAnswer,
): Promise<FinalReply> {
  let raw = final.response.content ?? '';
  const ctx = replyContext(state, raw);
  for (;;) {
    const decision = await reviewReply(ports, ctx, raw, final.sent.messages);
    if (decision.kind === 'final') return decision.reply;
    throwIfAborted(state);
    if (state.isRoom) await persistDraft(ports, state, decision.draft);
    const fitted = fitCall(ports, state, decision.scaffold, [], false);
    const response = await callModel(ports, state, { ...fitted, tools: [] });
    raw = response.content ?? '';
    nextAttempt(ctx, raw);
  }
}
