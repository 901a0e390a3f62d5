/**
 * The library's public surface, named export by named export: what is here is under semantic
 * versioning, and `test/public-surface.spec.ts` pins the list, so a change shows in review. The
 * engine's internals (lanes, scheduler, runner, phases) are not exported. The server's
 * composition root (`AppModule`) lives in `app.module.ts` and is not re-exported here, nor are
 * the testing helpers (`nest-agent-orchestrator/testing`, `src/testing/index.ts`).
 *
 * @packageDocumentation
 * @module nest-agent-orchestrator
 */

// The vocabulary: messages, turns, ports and their injection tokens, hooks, events, errors.
export {
  AgentError,
  AgentEvents,
  AgentOptionsError,
  CONTROL_KINDS,
  ControlKinds,
  FencedWriteError,
  HistoryStore,
  InputInbox,
  InvalidInputError,
  isControlKind,
  normaliseDeep,
  normaliseText,
  LlmProvider,
  MessageArchive,
  ModelNotFoundError,
  NextCalledTwiceError,
  SessionLanesFactory,
  SessionNotFoundError,
  SessionStore,
  StoreMethodMissingError,
  StoreUnavailableError,
  TurnAbortedError,
  USAGE_BUCKETS,
  WellKnownMetadataKeys,
  WorkDispatcher,
} from './contracts';
export type {
  AbortOptions,
  Actor,
  Admission,
  ApprovalDecision,
  ApprovalEvent,
  ApprovalRecord,
  AgentEventMap,
  AgentEventName,
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  ContentSegment,
  ContributionBucket,
  ControlKind,
  DispatchView,
  DropReason,
  EnteredInput,
  HistoryQuery,
  HoldRelease,
  InboxAcceptOptions,
  InboxEntry,
  HookContextMap,
  HookMiddleware,
  HookName,
  PendingApproval,
  HookNext,
  IncomingMessage,
  InputBeforeContext,
  JsonSchema,
  LaneAdmission,
  LlmAfterContext,
  LlmBeforeContext,
  Message,
  MessageAttachment,
  MessageRole,
  ModelCapabilities,
  ModelMessage,
  ModelRef,
  ModelRefLike,
  NewMessage,
  OutgoingMessage,
  ProviderUsage,
  QueueEvent,
  ReplyBeforeContext,
  SessionActivity,
  SessionActivityKey,
  SessionActivityQuery,
  SessionDeletedEvent,
  SessionEnsureOptions,
  SessionKind,
  SessionLanes,
  SessionList,
  SessionListQuery,
  SessionSettings,
  SessionSettingsPatch,
  SessionState,
  SessionSummary,
  SessionView,
  Settlement,
  StreamEvent,
  TokenRequestEvent,
  TokenUsageEvent,
  TokenUsagePart,
  ToolAfterContext,
  ToolBeforeContext,
  ToolCall,
  ToolCallContext,
  ToolDefinition,
  ToolExecuteEvent,
  ToolHandler,
  ToolSpec,
  TurnAfterContext,
  TurnBeforeContext,
  TurnEnd,
  TurnEndEvent,
  TurnEntry,
  TurnInput,
  TurnOutcome,
  TurnRecord,
  TurnStartEvent,
  TurnStreamPosition,
  UsageBreakdown,
  UsageBucket,
  WellKnownMetadataKey,
  WriteFencing,
} from './contracts';

// Hooks, prompt contributions, token accounting.
export { AgentHook, HookRegistry } from './hooks';
export type { AgentHookOptions, HookUseOptions } from './hooks';
export { PromptAssembler, PromptContribution } from './prompt';
export type {
  ContributionOutput,
  PromptAnchor,
  PromptContributionSpec,
  PromptView,
} from './prompt';
export { TokenEstimator, UsageTracker } from './usage';
export type { TokenEncoding } from './usage';

// Stores: in memory, SQLite and PostgreSQL.
export {
  createSqlStores,
  MemoryInputInbox,
  MemoryMessageLog,
  MemorySessionStore,
  SqlInputInbox,
  SqlMessageLog,
  SqlSessionFences,
  SqlSessionStore,
  StoreOpenError,
} from './session-bridge';
export type { SqlStoreOptions, SqlStores } from './session-bridge';

// Model providers.
export {
  AnthropicProvider,
  DemoProvider,
  ModelRegistry,
  OpenAiCompatibleProvider,
  ProviderError,
} from './llm';
export type {
  AnthropicProviderOptions,
  DemoProviderOptions,
  OpenAiCompatibleProviderOptions,
  ProviderErrorKind,
  ResilienceOptions,
  ResolvedModel,
} from './llm';

// The agent: module, service, tools, instrumentation.
export {
  AGENT_MODULE_OPTIONS,
  AGENT_OPTIONS,
  AgentInstrumentation,
  AgentModule,
  AgentService,
  AgentTool,
  McpServers,
  toolError,
  ToolOutput,
  ToolRegistry,
} from './agent';
export type {
  AgentModuleExtras,
  AgentModuleOptions,
  InputInfo,
  InstrumentationLayer,
  McpApproval,
  McpHttpServerConfig,
  McpServerConfig,
  McpServersConfig,
  McpServerState,
  McpServerStatus,
  McpStdioServerConfig,
  ModelCallInfo,
  Preprocessor,
  PreprocessorNext,
  ResolvedAgentOptions,
  ToolCallInfo,
  ToolResult,
  TrimmingOptions,
  TurnConclusion,
  TurnInfo,
} from './agent';

// Where a session's work runs: the in-process dispatcher, for hosts that wrap or replace it.
export { InProcessDispatcher } from './distribution';
// Distributed mode (`AgentModule` option `distribution`): its options, errors and write fencing.
export { DistributionOptionsError, LeaseFencing, RedisSettingsError } from './distribution';
export type { DistributionOptions, DistributionStores } from './distribution';
