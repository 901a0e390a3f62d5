import {
  HistoryStore,
  MessageArchive,
  SessionStore,
  type HistoryStore as HistoryStorePort,
  type MessageArchive as MessageArchivePort,
  type SessionStore as SessionStorePort,
} from '../contracts';
import { HookRegistry } from '../hooks';
import { ModelRegistry } from '../llm';
import { PromptAssembler } from '../prompt';
import { TokenEstimator, UsageTracker } from '../usage';
import { AgentEventBus } from './agent-event.bus';
import { AGENT_OPTIONS } from './agent.module-definition';
import type { ResolvedAgentOptions } from './agent.options';
import type { RunnerPorts } from './engine';
import { AgentInstrumentation } from './instrumentation';
import { ToolRegistry } from './tools';

/** What the turn runner is built from, in `RUNNER_PORTS` order. */
export type RunnerPortList = [
  ResolvedAgentOptions,
  HookRegistry,
  PromptAssembler,
  ToolRegistry,
  ModelRegistry,
  SessionStorePort,
  HistoryStorePort,
  MessageArchivePort,
  AgentEventBus,
  UsageTracker,
  TokenEstimator,
  AgentInstrumentation,
];

/** The injection tokens of the turn runner's ports. */
export const RUNNER_PORTS = [
  AGENT_OPTIONS,
  HookRegistry,
  PromptAssembler,
  ToolRegistry,
  ModelRegistry,
  SessionStore,
  HistoryStore,
  MessageArchive,
  AgentEventBus,
  UsageTracker,
  TokenEstimator,
  AgentInstrumentation,
];

/** The runner's ports, named. */
export function runnerPorts(list: RunnerPortList): RunnerPorts {
  const [options, hooks, prompts, tools, models, sessions, history, archive, events, ...rest] =
    list;
  const [usage, estimator, instrumentation] = rest;
  return {
    options,
    hooks,
    prompts,
    tools,
    models,
    sessions,
    history,
    archive,
    events,
    usage,
    estimator,
    instrumentation,
  };
}
