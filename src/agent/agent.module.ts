import { Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  HistoryStore,
  LlmProvider,
  MessageArchive,
  SessionLanesFactory,
  SessionStore,
  WorkDispatcher,
  type SessionLanesFactory as LanesFactory,
  type WorkDispatcher as WorkDispatcherPort,
  type LlmProvider as LlmProviderPort,
  type MessageArchive as MessageArchivePort,
  type SessionStore as SessionStorePort,
} from '../contracts';
import { HookRegistry } from '../hooks';
import { ModelRegistry } from '../llm';
import { InProcessDispatcher } from '../distribution';
import { PromptAssembler } from '../prompt';
import { MemoryMessageLog, MemorySessionStore } from '../session-bridge';
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
import { AgentInstrumentation } from './instrumentation';
import { RUNNER_PORTS, runnerPorts, type RunnerPortList } from './runner-ports';
import { ToolRegistry } from './tools';
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
        archive: MessageArchivePort,
        options: ResolvedAgentOptions,
      ): LanesFactory =>
      (admission) =>
        new TurnScheduler({ events, archive, options }, runner, admission),
    inject: [TurnRunner, AgentEventBus, MessageArchive, AGENT_OPTIONS],
  },
  {
    provide: WorkDispatcher,
    useFactory: (lanes: LanesFactory) => new InProcessDispatcher(lanes),
    inject: [SessionLanesFactory],
  },
  {
    provide: InputGate,
    useFactory: (
      hooks: HookRegistry,
      sessions: SessionStorePort,
      archive: MessageArchivePort,
      events: AgentEventBus,
      instrumentation: AgentInstrumentation,
      dispatcher: WorkDispatcherPort,
    ) => new InputGate({ hooks, sessions, archive, events, instrumentation }, dispatcher),
    inject: [
      HookRegistry,
      SessionStore,
      MessageArchive,
      AgentEventBus,
      AgentInstrumentation,
      WorkDispatcher,
    ],
  },
];

/**
 * The agent as a Nest module: `AgentModule.forRoot(options)` or `forRootAsync({ imports,
 * inject, useFactory })`. Needs `EventEmitterModule.forRoot()` in the application. Ports are
 * bound from the options, or by token through the `providers` extra.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    HookRegistry,
    PromptAssembler,
    ToolRegistry,
    TokenEstimator,
    UsageTracker,
    AgentEventBus,
    AgentExplorer,
    AgentInstrumentation,
    AgentService,
    UsageSnapshots,
    ...ports,
    ...engine,
  ],
  exports: [
    AgentService,
    HookRegistry,
    PromptAssembler,
    ToolRegistry,
    UsageTracker,
    TokenEstimator,
    ModelRegistry,
    SessionStore,
    HistoryStore,
    MessageArchive,
    WorkDispatcher,
    SessionLanesFactory,
    AgentInstrumentation,
    AgentEventBus,
    AGENT_OPTIONS,
  ],
})
export class AgentModule extends AgentConfigurableModule {}
