import { Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import {
  HistoryStore,
  LlmProvider,
  MessageArchive,
  SessionStore,
  WorkDispatcher,
  type HistoryStore as HistoryStorePort,
  type WorkDispatcher as WorkDispatcherPort,
  type LlmProvider as LlmProviderPort,
  type MessageArchive as MessageArchivePort,
  type SessionStore as SessionStorePort,
} from '../contracts';
import { HookRegistry } from '../hooks';
import { ModelRegistry } from '../llm';
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
import { AGENT_TURN_DEPS } from './agent.tokens';
import { AgentExplorer } from './discovery/agent.explorer';
import {
  HoldTable,
  InProcessDispatcher,
  InputGate,
  TurnRunner,
  TurnScheduler,
  type TurnDeps,
} from './engine';
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
    provide: AGENT_TURN_DEPS,
    useFactory: (
      options: ResolvedAgentOptions,
      hooks: HookRegistry,
      prompts: PromptAssembler,
      tools: ToolRegistry,
      models: ModelRegistry,
      sessions: SessionStorePort,
      history: HistoryStorePort,
      archive: MessageArchivePort,
      events: AgentEventBus,
      usage: UsageTracker,
      estimator: TokenEstimator,
    ): TurnDeps => ({
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
    }),
    inject: [
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
    ],
  },
  { provide: HoldTable, useFactory: () => new HoldTable() },
  {
    provide: TurnRunner,
    useFactory: (deps: TurnDeps) => new TurnRunner(deps),
    inject: [AGENT_TURN_DEPS],
  },
  {
    provide: TurnScheduler,
    useFactory: (deps: TurnDeps, runner: TurnRunner, holds: HoldTable) =>
      new TurnScheduler(deps, runner, holds),
    inject: [AGENT_TURN_DEPS, TurnRunner, HoldTable],
  },
  {
    provide: WorkDispatcher,
    useFactory: (scheduler: TurnScheduler) => new InProcessDispatcher(scheduler),
    inject: [TurnScheduler],
  },
  {
    provide: InputGate,
    useFactory: (deps: TurnDeps, dispatcher: WorkDispatcherPort, holds: HoldTable) =>
      new InputGate(deps, dispatcher, holds),
    inject: [AGENT_TURN_DEPS, WorkDispatcher, HoldTable],
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
    AGENT_OPTIONS,
  ],
})
export class AgentModule extends AgentConfigurableModule {}
