import type { ModelMessage, ToolDefinition } from '../../contracts';
import { dropHistorySegments, trimToBudget } from '../../prompt';
import {
  bucketMessages,
  classifyMessage,
  REPLY_PRIMING,
  type BucketedUsage,
  type UsageBucketer,
} from '../../usage';
import { tokenBudgetFor } from '../agent.options';
import type { EnginePorts } from './ports';
import type { TurnState } from './turn-state';

/** What one model call is sent: the fitted list and the tool definitions. */
export interface SentCall extends FittedCall {
  tools: ToolDefinition[];
}

/** A list fitted to the budget, with the U4 figure of what it was before. */
export interface FittedCall {
  messages: ModelMessage[];
  /** History + tool results estimate before any hard trim in this turn (U4). */
  untrimmedHistory: number;
  /** The usage buckets of `messages` with the tools, when fitting made them (nothing trimmed). */
  bucketed?: BucketedUsage;
}

/** What fitting a call to the budget uses. */
export type FitPorts = Pick<EnginePorts, 'estimator' | 'options'>;

/** The prompt token budget of the turn's model. */
export function budgetOf(ports: Pick<EnginePorts, 'options'>, state: TurnState): number {
  return tokenBudgetFor(ports.options, state.model!.capabilities);
}

/**
 * Keeps a call within the budget (U3, U4): history beyond its allowance loses its oldest
 * segments, then the hard trim runs when the estimate exceeds the budget. Either sets the turn's
 * sticky `trimmed`. The first call of a turn replaces the working list with its result, so later
 * calls append to the already-trimmed list; later calls trim into a copy (`first: false`).
 * `listed`: the list's count (reply priming included) when the caller has it, and its messages
 * already bucketed (every one, in order) when the caller's count made the buckets too.
 */
export function fitCall(
  deps: FitPorts,
  state: TurnState,
  messages: ModelMessage[],
  tools: ToolDefinition[],
  first: boolean,
  listed?: { tokens: number; bucketer?: UsageBucketer },
): FittedCall {
  const encoding = state.encodingOf(deps.estimator);
  const count = (m: ModelMessage) => deps.estimator.countMessage(m, encoding);
  const { trimming } = deps.options;
  const budget = budgetOf(deps, state);
  const allowance = Math.floor(budget * trimming.historyShare);
  const toolTokens = deps.estimator.countTools(tools, encoding);
  // The whole list within the history allowance and, with the tools, the budget: nothing can
  // be dropped or trimmed.
  const listTokens = listed === undefined ? undefined : listed.tokens - REPLY_PRIMING;
  if (listTokens !== undefined && listTokens <= allowance && listTokens + toolTokens <= budget) {
    return untouched(state, messages, first, count, toolTokens, listed?.bucketer);
  }
  const before = historyTokens(messages, count);
  const segments = dropHistorySegments(messages, {
    allowance,
    segment: Math.max(1, Math.floor(allowance * trimming.segmentShare)),
    count,
  });
  const trim = trimToBudget(segments.messages, {
    budget,
    count,
    toolTokens,
    systemAllowance: trimming.systemAllowance,
  });
  if (segments.dropped || trim.exceeded) state.trimmed = true;
  // Nothing dropped and no hard trim: the list is as it was, nothing to walk again.
  const cut = segments.dropped || trim.exceeded ? before - historyTokens(trim.messages, count) : 0;
  const untrimmedHistory = before + state.historyCut;
  if (first) {
    // A copy: the sent list is handed to agent:llm:after and must not grow with the turn.
    state.working = [...trim.messages];
    state.historyCut += cut;
  }
  return { messages: trim.messages, untrimmedHistory };
}

/**
 * A call nothing can be cut from: one walk over the list, which makes the call's usage buckets
 * (`token:usage` reuses them) and the U4 figure.
 */
function untouched(
  state: TurnState,
  messages: ModelMessage[],
  first: boolean,
  count: (m: ModelMessage) => number,
  toolTokens: number,
  /** The messages already bucketed, every one in order (the caller's count made them). */
  bucketer?: UsageBucketer,
): FittedCall {
  const reserve = state.model!.capabilities.maxOutputTokens;
  const bucketed = bucketer
    ? bucketer.finish(toolTokens, reserve)
    : bucketMessages(messages, count, toolTokens, reserve);
  const { history, toolResults } = bucketed.breakdown;
  const untrimmedHistory = history + toolResults + state.historyCut;
  // A copy: the sent list is handed to agent:llm:after and must not grow with the turn. The sent
  // list itself is the call's own (`prepareCall` made it for this call), as a trimmed one is.
  if (first) state.working = [...messages];
  return { messages, untrimmedHistory, bucketed };
}

function historyTokens(list: readonly ModelMessage[], count: (m: ModelMessage) => number): number {
  let total = 0;
  for (const m of list) {
    const { bucket } = classifyMessage(m);
    if (bucket === 'history' || bucket === 'toolResults') total += count(m);
  }
  return total;
}
