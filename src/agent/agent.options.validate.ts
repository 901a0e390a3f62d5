import { AgentOptionsError, type ModelRef } from '../contracts';
import {
  AGENT_OPTION_DEFAULTS,
  type AgentModuleOptions,
  type ResolvedAgentOptions,
} from './agent.options';
import { mcpServersProblem } from './mcp/mcp.config';

/** Parses `'model'` or `'provider/model'` into a `ModelRef`. */
export function parseModelRef(value: string | ModelRef): ModelRef {
  if (typeof value !== 'string') return { ...value };
  const slash = value.indexOf('/');
  return slash > 0
    ? { provider: value.slice(0, slash), model: value.slice(slash + 1) }
    : { model: value };
}

function integer(name: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new AgentOptionsError(
      `AgentModule option "${name}" must be an integer >= ${min}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function flag(name: string, value: unknown): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  throw new AgentOptionsError(
    `AgentModule option "${name}" must be true or false, got ${JSON.stringify(value)}`,
  );
}

function share(name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0 && value <= 1)) {
    throw new AgentOptionsError(
      `AgentModule option "${name}" must be a number in (0, 1], got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function port(name: string, value: unknown, methods: string[]): void {
  if (value === undefined) return;
  const missing = methods.filter((m) => typeof (value as any)?.[m] !== 'function');
  if (missing.length) {
    throw new AgentOptionsError(
      `AgentModule option "${name}" is missing method(s): ${missing.join(', ')}`,
    );
  }
}

/** The ports given are objects with their methods; `mcpServers` is well-formed. */
function checkPortsAndServers(options: AgentModuleOptions): void {
  port('llmProvider', options.llmProvider, ['capabilities', 'chat']);
  (options.llmProviders ?? []).forEach((p, i) =>
    port(`llmProviders[${i}]`, p, ['capabilities', 'chat']),
  );
  port('sessionStore', options.sessionStore, [
    'get',
    'ensure',
    'update',
    'delete',
    'generationOf',
    'advanceGeneration',
  ]);
  port('historyStore', options.historyStore, ['history', 'count', 'clear', 'rollbackTurn']);
  port('messageArchive', options.messageArchive, ['append']);
  const mcpProblem =
    options.mcpServers === undefined ? undefined : mcpServersProblem(options.mcpServers);
  if (mcpProblem) throw new AgentOptionsError(`AgentModule option ${mcpProblem}`);
}

/** Validates the options and applies defaults; throws `AgentOptionsError` naming the option. */
export function resolveAgentOptions(options: AgentModuleOptions = {}): ResolvedAgentOptions {
  const d = AGENT_OPTION_DEFAULTS;
  const contextWindow = integer('contextWindow', options.contextWindow, 256) ?? d.contextWindow;
  const maxOutputTokens =
    integer('maxOutputTokens', options.maxOutputTokens, 1) ?? d.maxOutputTokens;
  const tokenBudget = integer('tokenBudget', options.tokenBudget, 1);
  if (options.systemPrompt !== undefined && typeof options.systemPrompt !== 'string') {
    throw new AgentOptionsError('AgentModule option "systemPrompt" must be a string');
  }
  let defaultModel: ModelRef | undefined;
  if (options.defaultModel !== undefined) {
    defaultModel = parseModelRef(options.defaultModel);
    if (!defaultModel.model) {
      throw new AgentOptionsError('AgentModule option "defaultModel" must name a model');
    }
  }
  checkPortsAndServers(options);
  return {
    contextWindow,
    maxOutputTokens,
    tokenBudget,
    defaultModel,
    maxToolIterations:
      integer('maxToolIterations', options.maxToolIterations, 0) ?? d.maxToolIterations,
    historyLimit: integer('historyLimit', options.historyLimit, 0) ?? d.historyLimit,
    systemPrompt: options.systemPrompt ?? d.systemPrompt,
    modelCapabilities: options.modelCapabilities ?? {},
    llmProviders: options.llmProviders ?? [],
    toolTimeoutMs: integer('toolTimeoutMs', options.toolTimeoutMs, 1) ?? d.toolTimeoutMs,
    mcpServers: options.mcpServers ?? {},
    mcpConnectTimeoutMs:
      integer('mcpConnectTimeoutMs', options.mcpConnectTimeoutMs, 1) ?? d.mcpConnectTimeoutMs,
    shutdownTimeoutMs:
      integer('shutdownTimeoutMs', options.shutdownTimeoutMs, 0) ?? d.shutdownTimeoutMs,
    maxWaiting: integer('maxWaiting', options.maxWaiting, 1) ?? d.maxWaiting,
    llmIdleTimeoutMs:
      integer('llmIdleTimeoutMs', options.llmIdleTimeoutMs, 1) ?? d.llmIdleTimeoutMs,
    turnTimeoutMs: integer('turnTimeoutMs', options.turnTimeoutMs, 0) ?? d.turnTimeoutMs,
    approvalTimeoutMs:
      integer('approvalTimeoutMs', options.approvalTimeoutMs, 1) ?? d.approvalTimeoutMs,
    traceContent: flag('traceContent', options.traceContent) ?? false,
    traceHookThresholdMs:
      integer('traceHookThresholdMs', options.traceHookThresholdMs, 0) ?? d.traceHookThresholdMs,
    selfId: options.selfId,
    trimming: {
      historyShare: share('trimming.historyShare', options.trimming?.historyShare) ?? 0.6,
      segmentShare: share('trimming.segmentShare', options.trimming?.segmentShare) ?? 0.25,
      systemAllowance:
        integer('trimming.systemAllowance', options.trimming?.systemAllowance, 0) ?? 4096,
    },
  };
}
