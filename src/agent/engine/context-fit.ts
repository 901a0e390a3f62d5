import type { ModelMessage, ToolDefinition } from '../../contracts';
import { dropHistorySegments, trimToBudget } from '../../prompt';
import { classifyMessage } from '../../usage';
import { tokenBudgetFor } from '../agent.options';
import type { TurnDeps } from './turn-deps';
import type { TurnState } from './turn-state';

/** A list fitted to the budget, with the U4 figure of what it was before. */
export interface FittedCall {
  messages: ModelMessage[];
  /** History + tool results estimate before any hard trim in this turn (U4). */
  untrimmedHistory: number;
}

/** The prompt token budget of the turn's model. */
export function budgetOf(deps: TurnDeps, state: TurnState): number {
  return tokenBudgetFor(deps.options, state.model!.capabilities);
}

/**
 * Keeps a call within the budget (U3, U4): history beyond its allowance loses its oldest
 * segments, then the hard trim runs when the estimate exceeds the budget. Either sets the turn's
 * sticky `trimmed`. The first call of a turn replaces the working list with its result, so later
 * calls append to the already-trimmed list; later calls trim into a copy (`first: false`).
 */
export function fitCall(
  deps: TurnDeps,
  state: TurnState,
  messages: ModelMessage[],
  tools: ToolDefinition[],
  first: boolean,
): FittedCall {
  const encoding = state.encodingOf(deps.estimator);
  const count = (m: ModelMessage) => deps.estimator.countMessage(m, encoding);
  const { trimming } = deps.options;
  const budget = budgetOf(deps, state);
  const before = historyTokens(messages, count);
  const allowance = Math.floor(budget * trimming.historyShare);
  const segments = dropHistorySegments(messages, {
    allowance,
    segment: Math.max(1, Math.floor(allowance * trimming.segmentShare)),
    count,
  });
  const trim = trimToBudget(segments.messages, {
    budget,
    count,
    toolTokens: deps.estimator.countTools(tools, encoding),
    systemAllowance: trimming.systemAllowance,
  });
  if (segments.dropped || trim.exceeded) state.trimmed = true;
  const cut = before - historyTokens(trim.messages, count);
  const untrimmedHistory = before + state.historyCut;
  if (first) {
    // A copy: the sent list is handed to agent:llm:after and must not grow with the turn.
    state.working = [...trim.messages];
    state.historyCut += cut;
  }
  return { messages: trim.messages, untrimmedHistory };
}

function historyTokens(list: readonly ModelMessage[], count: (m: ModelMessage) => number): number {
  let total = 0;
  for (const m of list) {
    const { bucket } = classifyMessage(m);
    if (bucket === 'history' || bucket === 'toolResults') total += count(m);
  }
  return total;
}
