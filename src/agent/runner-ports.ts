import { HookRegistry } from '../hooks';
import { ModelRegistry } from '../llm';
import { PromptAssembler } from '../prompt';
import { TokenEstimator, UsageTracker } from '../usage';
import { AgentEventBus } from './agent-event.bus';
import { AGENT_OPTIONS } from './agent.module-definition';
import type { ResolvedAgentOptions } from './agent.options';
import type { RunnerPorts } from './engine';
import { AgentInstrumentation } from './instrumentation';
import { GUARDED_STORES, type GuardedStores } from './store-guard';
import { ToolRegistry } from './tools';
import { ApprovalRegistry } from './tools/approval.registry';

/** What the turn runner is built from, in `RUNNER_PORTS` order. */
export type RunnerPortList = [
  ResolvedAgentOptions,
  HookRegistry,
  PromptAssembler,
  ToolRegistry,
  ModelRegistry,
  GuardedStores,
  AgentEventBus,
  UsageTracker,
  TokenEstimator,
  AgentInstrumentation,
  ApprovalRegistry,
];

/** The injection tokens of the turn runner's ports. */
export const RUNNER_PORTS = [
  AGENT_OPTIONS,
  HookRegistry,
  PromptAssembler,
  ToolRegistry,
  ModelRegistry,
  GUARDED_STORES,
  AgentEventBus,
  UsageTracker,
  TokenEstimator,
  AgentInstrumentation,
  ApprovalRegistry,
];

/** The runner's ports, named. */
export function runnerPorts(list: RunnerPortList): RunnerPorts {
  const [
    options,
    hooks,
    prompts,
    tools,
    models,
    stores,
    events,
    usage,
    estimator,
    instrumentation,
    approvals,
  ] = list;
  return {
    options,
    hooks,
    prompts,
    tools,
    models,
    ...stores,
    events,
    usage,
    estimator,
    instrumentation,
    approvals,
  };
}
