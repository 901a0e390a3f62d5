import {
  TurnAbortedError,
  type LlmBeforeContext,
  type ModelMessage,
  type ToolDefinition,
} from '../../../contracts';
import { historyForModel, historyToModelMessages } from '../../../prompt';
import { UsageBucketer } from '../../../usage';
import { fitCall, type SentCall } from '../context-fit';
import type { EnginePorts } from '../ports';
import { historyLimitOf, type TurnState } from '../turn-state';

/**
 * The turn's first working list: the system prompt, history within the limit (this turn's
 * inputs left out), then the opening inputs.
 */
export async function basePrompt(
  ports: Pick<EnginePorts, 'history' | 'options' | 'estimator'>,
  state: TurnState,
): Promise<ModelMessage[]> {
  const own = new Set<string>();
  for (const input of state.turn.inputs) if (input.archived) own.add(input.archived.id);
  const limit = historyLimitOf(ports.options, state);
  const query = { limit: limit ? limit + own.size : 0 };
  const stored = await historyForModel(ports.history, state.sessionId, query);
  const history = historyToModelMessages(stored, { room: state.isRoom, exclude: own });
  const system: ModelMessage = {
    role: 'system',
    content: ports.options.systemPrompt,
    metadata: { injector: 'persona', bucket: 'persona' },
  };
  const list = [system, ...history];
  // Counted now (off the loop when large), into the messages built here.
  const stamping = ports.estimator.stampCounts(list, state.encodingOf(ports.estimator));
  if (stamping) await stamping;
  for (const message of state.openingMessages) list.push(message);
  return list;
}

/** What preparing a model call uses. */
export type PromptStepPorts = Pick<EnginePorts, 'prompts' | 'hooks' | 'estimator' | 'options'>;

/**
 * Prepares one model call: contributions are materialised into the working list (R1),
 * `agent:llm:before` runs on finished messages (H2, H3), then the list is fitted to the budget
 * (U3, U4).
 */
export async function prepareCall(
  ports: PromptStepPorts,
  state: TurnState,
  tools: ToolDefinition[],
): Promise<SentCall> {
  const { turn } = state;
  state.working = await ports.prompts.materialise(state.working, {
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
    turnId: turn.id,
    platform: state.platform,
    inputs: turn.inputs,
    model: state.model!.ref,
    signal: turn.signal,
  };
  // Set after the literal, not spread into it (a spread builds the whole object the slow way).
  if (turn.source !== undefined) ctx.source = turn.source;
  await ports.hooks.run('agent:llm:before', ctx);
  if (turn.aborted) throw new TurnAbortedError();
  // Large uncached texts are counted in worker threads first, so the synchronous counting of
  // the budget and usage below only hits the cache and never stalls other sessions.
  // The same pass makes the call's usage buckets, as long as it knew every count at once.
  const bucketer = new UsageBucketer();
  const encoding = state.encodingOf(ports.estimator);
  const counting = ports.estimator.precount(ctx.messages, encoding, bucketer.add);
  const listTokens = typeof counting === 'number' ? counting : await counting;
  const listed = {
    tokens: listTokens,
    bucketer: bucketer.added === ctx.messages.length ? bucketer : undefined,
  };
  const fitted = fitCall(ports, state, ctx.messages, ctx.tools, state.calls === 0, listed);
  return { ...fitted, tools: ctx.tools };
}
