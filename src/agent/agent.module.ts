import { Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  HistoryStore,
  InputInbox,
  LlmProvider,
  MessageArchive,
  SessionLanesFactory,
  SessionStore,
  WorkDispatcher,
  type SessionLanesFactory as LanesFactory,
  type WorkDispatcher as WorkDispatcherPort,
  type LlmProvider as LlmProviderPort,
} from '../contracts';
import { HookRegistry } from '../hooks';
import { ModelRegistry } from '../llm';
import {
  DistributionOptionsError,
  InProcessDispatcher,
  type DistributionRuntime,
} from '../distribution';
import { DISTRIBUTION_RUNTIME, AgentDistribution } from './distribution-lifecycle';
import { PromptAssembler } from '../prompt';
import { MemoryInputInbox, MemoryMessageLog, MemorySessionStore } from '../session-bridge';
import { TokenEstimator, UsageTracker } from '../usage';
import { AgentEventBus } from './agent-event.bus';
import {
  AGENT_MODULE_OPTIONS,
  AGENT_OPTIONS,
  AgentConfigurableModule,
} from './agent.module-definition';
import type { AgentModuleOptions, ResolvedAgentOptions } from './agent.options';
import { resolveAgentOptions } from './agent.options.validate';
import { AgentService } from './agent.service';
import { AgentExplorer } from './discovery/agent.explorer';
import { InputGate, TurnRunner, TurnScheduler } from './engine';
import { InputRecovery } from './input-recovery';
import { AgentInstrumentation } from './instrumentation';
import { AgentTracing } from './tracing';
import { RUNNER_PORTS, runnerPorts, type RunnerPortList } from './runner-ports';
import { GUARDED_STORES, guardStores, type GuardedStores } from './store-guard';
import { McpServers } from './mcp';
import { ToolRegistry } from './tools';
import { ApprovalRegistry } from './tools/approval.registry';
import { SessionAdmin } from './session-admin';
import { UsageSnapshots } from './usage-snapshots';

const ports: Provider[] = [
  { provide: MemoryMessageLog, useFactory: () => new MemoryMessageLog() },
  {
    provide: SessionStore,
    useFactory: (o: AgentModuleOptions) => o.sessionStore ?? new MemorySessionStore(),
    inject: [AGENT_MODULE_OPTIONS],
  },
  {
    provide: HistoryStore,
    useFactory: (o: AgentModuleOptions, log: MemoryMessageLog) => o.historyStore ?? log,
    inject: [AGENT_MODULE_OPTIONS, MemoryMessageLog],
  },
  {
    provide: MessageArchive,
    useFactory: (o: AgentModuleOptions, log: MemoryMessageLog) => o.messageArchive ?? log,
    inject: [AGENT_MODULE_OPTIONS, MemoryMessageLog],
  },
  {
    provide: InputInbox,
    useFactory: (o: AgentModuleOptions) => o.inputInbox ?? new MemoryInputInbox(),
    inject: [AGENT_MODULE_OPTIONS],
  },
  {
    provide: LlmProvider,
    useFactory: (o: AgentModuleOptions) => o.llmProvider ?? null,
    inject: [AGENT_MODULE_OPTIONS],
  },
];

const engine: Provider[] = [
  {
    provide: AGENT_OPTIONS,
    useFactory: (o: AgentModuleOptions) => resolveAgentOptions(o),
    inject: [AGENT_MODULE_OPTIONS],
  },
  {
    provide: ModelRegistry,
    useFactory: (o: ResolvedAgentOptions, main: LlmProviderPort | null) =>
      new ModelRegistry([main ?? undefined, ...o.llmProviders], o),
    inject: [AGENT_OPTIONS, LlmProvider],
  },
  {
    provide: GUARDED_STORES,
    useFactory: guardStores,
    inject: [SessionStore, HistoryStore, MessageArchive, InputInbox],
  },
  {
    provide: TurnRunner,
    useFactory: (...ports: RunnerPortList) => new TurnRunner(runnerPorts(ports)),
    inject: RUNNER_PORTS,
  },
  {
    provide: SessionLanesFactory,
    useFactory:
      (
        runner: TurnRunner,
        events: AgentEventBus,
        { archive, inbox }: GuardedStores,
        options: ResolvedAgentOptions,
        instrumentation: AgentInstrumentation,
        approvals: ApprovalRegistry,
      ): LanesFactory =>
      (admission) =>
        new TurnScheduler(
          { events, archive, inbox, options, instrumentation, approvals },
          runner,
          admission,
        ),
    inject: [
      TurnRunner,
      AgentEventBus,
      GUARDED_STORES,
      AGENT_OPTIONS,
      AgentInstrumentation,
      ApprovalRegistry,
    ],
  },
  // In one process there is none; a distributed module provides its own (agent.module-distributed).
  { provide: DISTRIBUTION_RUNTIME, useFactory: inProcessOnly, inject: [AGENT_MODULE_OPTIONS] },
  {
    provide: WorkDispatcher,
    useFactory: (lanes: LanesFactory, runtime: DistributionRuntime | null) =>
      runtime?.dispatcher ?? new InProcessDispatcher(lanes),
    inject: [SessionLanesFactory, DISTRIBUTION_RUNTIME],
  },
  {
    provide: InputGate,
    useFactory: (
      hooks: HookRegistry,
      { sessions, archive, inbox }: GuardedStores,
      events: AgentEventBus,
      instrumentation: AgentInstrumentation,
      dispatcher: WorkDispatcherPort,
    ) => new InputGate({ hooks, sessions, archive, inbox, events, instrumentation }, dispatcher),
    inject: [HookRegistry, GUARDED_STORES, AgentEventBus, AgentInstrumentation, WorkDispatcher],
  },
];

/**
 * The runtime of a module that was not made distributed: none. Options that ask for distribution
 * there came from a `forRootAsync` factory without the `distributed` extra, and the module has no
 * wake queue to run them with: the start stops with one line saying so.
 */
function inProcessOnly(options: AgentModuleOptions): null {
  if (options.distribution) {
    throw new DistributionOptionsError(
      'AgentModule.forRootAsync: the options factory returns distribution, so pass distributed: true next to useFactory (the module then wires its wake queue through @nestjs/bullmq)',
    );
  }
  return null;
}

/**
 * The agent as a Nest module: `AgentModule.forRoot(options)` or `forRootAsync({ imports,
 * inject, useFactory })`. Needs `EventEmitterModule.forRoot()` in the application. Ports are
 * bound from the options, or by token through the `providers` extra. Distributed mode
 * (`forRoot({ distribution })`, or `forRootAsync({ distributed: true, ... })` whose factory
 * returns `distribution`) also imports `@nestjs/bullmq`'s `BullModule` under the configuration
 * key `'agent'` for its wake queue and worker (README, "Distributed mode").
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    HookRegistry,
    PromptAssembler,
    ToolRegistry,
    McpServers,
    ApprovalRegistry,
    TokenEstimator,
    UsageTracker,
    AgentEventBus,
    AgentExplorer,
    AgentInstrumentation,
    AgentTracing,
    AgentService,
    InputRecovery,
    UsageSnapshots,
    SessionAdmin,
    AgentDistribution,
    ...ports,
    ...engine,
  ],
  exports: [
    AgentService,
    AgentDistribution,
    HookRegistry,
    PromptAssembler,
    ToolRegistry,
    McpServers,
    UsageTracker,
    TokenEstimator,
    ModelRegistry,
    SessionStore,
    HistoryStore,
    MessageArchive,
    InputInbox,
    WorkDispatcher,
    SessionLanesFactory,
    AgentInstrumentation,
    AgentEventBus,
    AGENT_OPTIONS,
  ],
})
export class AgentModule extends AgentConfigurableModule {}
