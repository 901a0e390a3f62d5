import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as ts from 'typescript';

/**
 * The library's public surface, pinned: the exported names of `dist/index.d.ts` as `npm run
 * build` emits it. A change to this list is a change of the package's API under semantic
 * versioning: make it on purpose, and say so in CHANGELOG.md.
 */
const PUBLIC_NAMES = [
  'AGENT_MODULE_OPTIONS',
  'AGENT_OPTIONS',
  'AbortOptions',
  'Actor',
  'Admission',
  'ApprovalDecision',
  'ApprovalEvent',
  'ApprovalRecord',
  'AgentError',
  'AgentEventMap',
  'AgentEventName',
  'AgentEvents',
  'AgentHook',
  'AgentHookOptions',
  'AgentInstrumentation',
  'AgentModule',
  'AgentModuleExtras',
  'AgentModuleOptions',
  'AgentOptionsError',
  'AgentService',
  'AgentTool',
  'AnthropicProvider',
  'AnthropicProviderOptions',
  'CONTROL_KINDS',
  'ChatRequest',
  'ChatResponse',
  'ChatStreamChunk',
  'ContentSegment',
  'ContributionBucket',
  'ContributionOutput',
  'ControlKind',
  'ControlKinds',
  'FencedWriteError',
  'DemoProvider',
  'DemoProviderOptions',
  'DispatchView',
  'DistributionOptions',
  'DistributionOptionsError',
  'DistributionStores',
  'DropReason',
  'EnteredInput',
  'HistoryQuery',
  'HistoryStore',
  'HoldRelease',
  'InboxAcceptOptions',
  'InboxEntry',
  'InputInbox',
  'HookContextMap',
  'HookMiddleware',
  'HookName',
  'HookNext',
  'HookRegistry',
  'HookUseOptions',
  'InProcessDispatcher',
  'IncomingMessage',
  'InputBeforeContext',
  'InputInfo',
  'InstrumentationLayer',
  'InvalidInputError',
  'JsonSchema',
  'LaneAdmission',
  'LlmAfterContext',
  'LlmBeforeContext',
  'LlmProvider',
  'McpApproval',
  'McpHttpServerConfig',
  'McpServerConfig',
  'McpServerState',
  'McpServerStatus',
  'McpServers',
  'McpServersConfig',
  'McpStdioServerConfig',
  'MemoryInputInbox',
  'MemoryMessageLog',
  'MemorySessionStore',
  'Message',
  'MessageArchive',
  'MessageAttachment',
  'MessageRole',
  'ModelCallInfo',
  'ModelCapabilities',
  'ModelMessage',
  'ModelNotFoundError',
  'ModelRef',
  'ModelRefLike',
  'ModelRegistry',
  'NewMessage',
  'NextCalledTwiceError',
  'OpenAiCompatibleProvider',
  'OpenAiCompatibleProviderOptions',
  'OutgoingMessage',
  'PendingApproval',
  'Preprocessor',
  'PreprocessorNext',
  'PromptAnchor',
  'PromptAssembler',
  'PromptContribution',
  'PromptContributionSpec',
  'PromptView',
  'ProviderError',
  'ProviderErrorKind',
  'ProviderUsage',
  'QueueEvent',
  'ReplyBeforeContext',
  'ResilienceOptions',
  'ResolvedAgentOptions',
  'ResolvedModel',
  'SessionActivity',
  'SessionActivityKey',
  'SessionActivityQuery',
  'SessionDeletedEvent',
  'SessionEnsureOptions',
  'SessionKind',
  'SessionLanes',
  'SessionLanesFactory',
  'SessionList',
  'SessionListQuery',
  'SessionNotFoundError',
  'SessionSettings',
  'SessionSettingsPatch',
  'SessionState',
  'SessionStore',
  'SessionSummary',
  'SessionView',
  'Settlement',
  'SqlInputInbox',
  'SqlMessageLog',
  'LeaseFencing',
  'RedisSettingsError',
  'SqlSessionFences',
  'SqlSessionStore',
  'SqlStoreOptions',
  'SqlStores',
  'StoreMethodMissingError',
  'StoreOpenError',
  'StoreUnavailableError',
  'StreamEvent',
  'TokenEncoding',
  'TokenEstimator',
  'TokenRequestEvent',
  'TokenUsageEvent',
  'TokenUsagePart',
  'ToolAfterContext',
  'ToolBeforeContext',
  'ToolCall',
  'ToolCallContext',
  'ToolCallInfo',
  'ToolDefinition',
  'ToolExecuteEvent',
  'ToolHandler',
  'ToolOutput',
  'ToolRegistry',
  'ToolResult',
  'ToolSpec',
  'TrimmingOptions',
  'TurnAbortedError',
  'TurnAfterContext',
  'TurnBeforeContext',
  'TurnConclusion',
  'TurnEnd',
  'TurnEndEvent',
  'TurnEntry',
  'TurnInfo',
  'TurnInput',
  'TurnOutcome',
  'TurnRecord',
  'TurnStartEvent',
  'TurnStreamPosition',
  'USAGE_BUCKETS',
  'UsageBreakdown',
  'UsageBucket',
  'UsageTracker',
  'WellKnownMetadataKey',
  'WellKnownMetadataKeys',
  'WorkDispatcher',
  'WriteFencing',
  'createSqlStores',
  'isControlKind',
  'normaliseDeep',
  'normaliseText',
  'toolError',
];

/** The names of `nest-agent-orchestrator/api` (`dist/api/public-api.d.ts`), pinned likewise. */
const API_NAMES = [
  'AcceptedResponse',
  'AgentApiModule',
  'AgentApiModuleExtras',
  'AgentApiModuleOptions',
  'AgentHealthIndicator',
  'AgentIoAdapter',
  'AgentMetrics',
  'AgentModuleMissingError',
  'ApiOptionsError',
  'ApprovalsResponse',
  'AuthenticatedRequest',
  'ClearedResponse',
  'ClientToServerEvents',
  'DashboardMount',
  'DecidedResponse',
  'ErrorBody',
  'ErrorResponse',
  'FieldErrors',
  'HistoryResponse',
  'PendingApprovalResponse',
  'QueueResponse',
  'RateLimit',
  'ServerEventName',
  'ServerEventPayload',
  'ServerToClientEvents',
  'SessionListResponse',
  'SessionResponse',
  'SessionSettingsResponse',
  'SessionSummaryResponse',
  'SettledResponse',
  'SocketAbortPayload',
  'SocketApprovalEvent',
  'SocketApprovePayload',
  'SocketToolEvent',
  'SocketTurnEvent',
  'StoppedAllResponse',
  'StoppedResponse',
  'SubscribeAck',
  'SubscribePayload',
  'UsageResponse',
];

/**
 * The testing entry's surface (`nest-agent-orchestrator/testing`): the exported names of
 * `dist/testing/index.d.ts`, pinned the same way. The repository's own test fakes use a few
 * more exports marked `@internal`, which the declarations leave out.
 */
const TESTING_NAMES = [
  'FakeErrorScript',
  'FakeFaultScript',
  'FakeOpenAiServer',
  'FakeRawScript',
  'FakeScript',
  'FakeScriptBase',
  'FakeTextScript',
  'FakeToolCall',
  'FakeToolCallsScript',
  'FakeUsage',
  'ReceivedHttpRequest',
  'ScriptedAbortError',
  'ScriptedAnswer',
  'ScriptedCall',
  'ScriptedHttpServer',
  'ScriptedOutcome',
  'ScriptedProvider',
  'listenLocal',
];

const ROOT = resolve(__dirname, '..');

/** Emits the declarations as the build does, into a temporary folder. */
function buildDeclarations(outDir: string): void {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(
    process.execPath,
    [tsc, '-p', 'tsconfig.build.json', '--emitDeclarationOnly', '--outDir', outDir],
    { cwd: ROOT, stdio: 'pipe' },
  );
}

/** The names a declaration file exports, sorted. */
function exportedNames(file: string): string[] {
  const program = ts.createProgram([file], { noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  return checker
    .getExportsOfModule(module)
    .map((symbol) => symbol.name)
    .sort();
}

describe('public surface (dist/index.d.ts, dist/api/public-api.d.ts, dist/testing/index.d.ts)', () => {
  let outDir: string;
  let names: string[];
  let testingNames: string[];

  beforeAll(() => {
    outDir = mkdtempSync(join(tmpdir(), 'agent-surface-'));
    buildDeclarations(outDir);
    names = exportedNames(join(outDir, 'index.d.ts'));
    testingNames = exportedNames(join(outDir, 'testing', 'index.d.ts'));
  }, 60_000);

  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('exports exactly the pinned names (a change here is an API change)', () => {
    expect(names).toEqual([...PUBLIC_NAMES].sort());
  });

  it('nest-agent-orchestrator/api exports exactly its pinned names', () => {
    expect(exportedNames(join(outDir, 'api', 'public-api.d.ts'))).toEqual([...API_NAMES].sort());
  });

  it('exports none of the engine internals', () => {
    const internals = [
      'TurnScheduler',
      'HoldTable',
      'InputGate',
      'SessionLane',
      'Deferred',
      'Turn',
    ];

    expect(names.filter((name) => internals.includes(name))).toEqual([]);
  });

  it('the testing entry exports exactly its pinned names (a change here is an API change)', () => {
    expect(testingNames).toEqual([...TESTING_NAMES].sort());
  });

  it('the main entry exports none of the testing helpers', () => {
    expect(names.filter((name) => TESTING_NAMES.includes(name))).toEqual([]);
  });
});
