/**
 * Test-only factories for the unit specs of the turn pipeline (house rule 13): strict automocks
 * that fail when an unmocked method is called, a recording event bus, a scripted model provider
 * and data factories. The heavy collaborators that are cheap to build (hooks, prompts, tools,
 * models, usage) are real instances; the stores are strict mocks, optionally backed by the
 * in-memory log so a spec can read back what was persisted.
 *
 * NOTE: `jest` comes from `@jest/globals` rather than the ambient global, so the file says
 * what it depends on.
 */
import { afterEach, beforeEach, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type {
  AgentEventMap,
  AgentEventName,
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  IncomingMessage,
  LlmProvider,
  Message,
  ModelCapabilities,
  ModelMessage,
  NewMessage,
  ProviderUsage,
  SessionSettings,
  ToolCall,
  ToolCallContext,
  ToolDefinition,
  ToolSpec,
} from '../../src/contracts';
import { HookRegistry } from '../../src/hooks';
import { ModelRegistry } from '../../src/llm';
import { PromptAssembler, TURN_INPUT_FLAG } from '../../src/prompt';
import { MemoryInputInbox, MemoryMessageLog, MemorySessionStore } from '../../src/session-bridge';
import { type TokenEstimator, UsageTracker } from '../../src/usage';
import type { AgentEventBus } from '../../src/agent/agent-event.bus';
import type { AgentModuleOptions } from '../../src/agent/agent.options';
import { resolveAgentOptions } from '../../src/agent/agent.options.validate';
import { AgentInstrumentation } from '../../src/agent/instrumentation';
import { ToolRegistry } from '../../src/agent/tools';
import { ApprovalRegistry } from '../../src/agent/tools/approval.registry';
import { Deferred } from '../../src/agent/engine/deferred';
import type { EnginePorts, LaneHandle } from '../../src/agent/engine/ports';
import { pendingInput } from '../../src/agent/engine/settlement';
import { Turn, type PendingInput } from '../../src/agent/engine/turn';
import { TurnState } from '../../src/agent/engine/turn-state';

// ---------------------------------------------------------------------------------------------
// Strict automocks (immich `server/test/utils.ts` shape)
// ---------------------------------------------------------------------------------------------

type AnyFunction = (...args: any[]) => any;

/** Every method of `T` as a jest mock; other members keep their type. */
export type AutoMocked<T> = {
  [K in keyof T]: T[K] extends AnyFunction ? jest.Mock<T[K]> : T[K];
};

/** Calls of unmocked methods that an engine `catch` may have swallowed; see `failOnUnmockedCalls`. */
const unmockedCalls: string[] = [];

function strictFn(label: string): jest.Mock<AnyFunction> {
  return jest.fn((): never => {
    const message = `Called a mock function without a mock implementation (${label})`;
    unmockedCalls.push(message);
    throw new Error(message);
  });
}

/**
 * A strict mock of a class: every prototype method is a jest mock that throws (and records the
 * call) until the test gives it an implementation.
 */
export function automock<T extends object>(
  Class: abstract new (...args: any[]) => T,
): AutoMocked<T> {
  const mock: Record<string, unknown> = {};
  for (const name of Object.getOwnPropertyNames(Class.prototype)) {
    if (name === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, name);
    if (typeof descriptor?.value === 'function') mock[name] = strictFn(`${Class.name}.${name}`);
  }
  return mock as AutoMocked<T>;
}

/** A strict mock of an interface, from the names of its methods. */
export function strictMock<T extends object>(
  label: string,
  methods: readonly (keyof T & string)[],
): AutoMocked<T> {
  return Object.fromEntries(
    methods.map((name) => [name, strictFn(`${label}.${name}`)]),
  ) as AutoMocked<T>;
}

/**
 * Registers an `afterEach` that fails the test when an unmocked method was called, also when the
 * engine caught the resulting error (turn runner, marker persistence, `agent:turn:after`).
 */
export function failOnUnmockedCalls(): void {
  afterEach(() => {
    const calls = unmockedCalls.splice(0);
    if (calls.length) throw new Error(calls.join('\n'));
  });
}

/** The Nest logger spies of the running test, by level. */
export type LoggerSpies = Record<'log' | 'warn' | 'error', jest.Mock<AnyFunction>>;

/**
 * Silences the Nest logger for each test and returns the spies (`log`, `warn`, `error`), so a spec
 * can assert what was logged. Call at the top of a `describe`.
 */
export function spyOnLogger(): LoggerSpies {
  const spies = {} as LoggerSpies;
  beforeEach(() => {
    for (const level of ['log', 'warn', 'error'] as const) {
      spies[level] = jest
        .spyOn(Logger.prototype, level)
        .mockImplementation(() => undefined) as unknown as jest.Mock<AnyFunction>;
    }
  });
  afterEach(() => {
    for (const spy of Object.values(spies)) spy.mockRestore();
  });
  return spies;
}

// ---------------------------------------------------------------------------------------------
// Recording event bus
// ---------------------------------------------------------------------------------------------

/** One emitted agent event. */
export interface EmittedEvent {
  name: AgentEventName;
  payload: unknown;
}

/** A fake `AgentEventBus` that records every `emit` in order; `on` is not used by the engine. */
export class RecordingEventBus {
  readonly emitted: EmittedEvent[] = [];

  emit<K extends AgentEventName>(name: K, payload: AgentEventMap[K]): void {
    this.emitted.push({ name, payload });
  }

  /** Somebody listens to every event: the recorder. */
  hasListeners(): boolean {
    return true;
  }

  on(name: AgentEventName): never {
    throw new Error(`RecordingEventBus.on(${name}) is not mocked`);
  }

  /** Payloads of one event name, in order. */
  of<K extends AgentEventName>(name: K): AgentEventMap[K][] {
    return this.emitted.filter((e) => e.name === name).map((e) => e.payload as AgentEventMap[K]);
  }

  /** Event names in emit order. */
  names(): AgentEventName[] {
    return this.emitted.map((e) => e.name);
  }

  /** This bus as the port the engine expects. */
  asBus(): AgentEventBus {
    return this as unknown as AgentEventBus;
  }
}

// ---------------------------------------------------------------------------------------------
// Scripted model provider
// ---------------------------------------------------------------------------------------------

/** One scripted model answer: chunks to stream, an error to throw, or a custom stream. */
export type ModelStep =
  | { chunks: ChatStreamChunk[] }
  | { error: Error }
  | { run: (request: ChatRequest) => AsyncIterable<ChatStreamChunk> };

/** Default capabilities of the scripted model. */
export const SCRIPTED_CAPABILITIES: ModelCapabilities = {
  contextWindow: 128_000,
  maxOutputTokens: 1024,
  vision: false,
  tools: true,
};

/**
 * An in-process `LlmProvider` answering from a script, one step per call, in order. A call with
 * no step left fails loudly. Streams by default; `{ streaming: false }` gives a chat-only provider
 * (no `stream` method, I16).
 */
export class ScriptedModel implements LlmProvider {
  readonly id = 'scripted';
  readonly defaultModel = 'scripted-model';
  /** Every request, in call order. */
  readonly requests: ChatRequest[] = [];
  readonly stream?: (request: ChatRequest) => AsyncIterable<ChatStreamChunk>;
  readonly chat: jest.Mock<(request: ChatRequest) => Promise<ChatResponse>>;
  private readonly steps: ModelStep[] = [];
  private readonly caps: ModelCapabilities;

  constructor(options: { streaming?: boolean; capabilities?: Partial<ModelCapabilities> } = {}) {
    this.caps = { ...SCRIPTED_CAPABILITIES, ...options.capabilities };
    if (options.streaming !== false) this.stream = (request) => this.take(request);
    this.chat = jest.fn((request: ChatRequest) => collect(this.take(request)));
  }

  capabilities(model: string): ModelCapabilities | undefined {
    return model === this.defaultModel ? { ...this.caps } : undefined;
  }

  /** Appends answers to the script. */
  script(...steps: ModelStep[]): this {
    this.steps.push(...steps);
    return this;
  }

  /** Steps not consumed yet. */
  get pending(): number {
    return this.steps.length;
  }

  private async *take(request: ChatRequest): AsyncIterable<ChatStreamChunk> {
    this.requests.push(request);
    const step = this.steps.shift();
    if (!step)
      throw new Error(`ScriptedModel: no answer scripted for call #${this.requests.length}`);
    if ('error' in step) throw step.error;
    if ('run' in step) yield* step.run(request);
    else yield* step.chunks;
  }
}

/** A stream folded into one answer, as a chat-only provider returns it. */
async function collect(stream: AsyncIterable<ChatStreamChunk>): Promise<ChatResponse> {
  let content = '';
  let reasoning = '';
  let toolCalls: ToolCall[] | undefined;
  let usage: ProviderUsage | undefined;
  for await (const chunk of stream) {
    content += chunk.contentDelta ?? '';
    reasoning += chunk.reasoningDelta ?? '';
    if (chunk.toolCalls?.length) toolCalls = chunk.toolCalls;
    if (chunk.usage) usage = { ...usage, ...chunk.usage };
  }
  return {
    content,
    ...(reasoning ? { reasoningContent: reasoning } : {}),
    ...(toolCalls ? { toolCalls } : {}),
    ...(usage ? { usage } : {}),
  };
}

/**
 * A model answer held by the test: `chunks` before the hold stream at once, then the call waits
 * until `answer` or `fail`. `reached` resolves once the engine has consumed the chunks before
 * the hold and is waiting for more.
 */
export class HeldAnswer {
  readonly reached = new Deferred<ChatRequest>();
  private readonly gate = new Deferred<{ chunks: ChatStreamChunk[] } | { error: Error }>();

  constructor(private readonly before: ChatStreamChunk[] = []) {}

  /** The step to script. */
  step(): ModelStep {
    return { run: (request) => this.run(request) };
  }

  answer(...chunks: ChatStreamChunk[]): void {
    this.gate.resolve({ chunks });
  }

  fail(error: Error): void {
    this.gate.resolve({ error });
  }

  private async *run(request: ChatRequest): AsyncIterable<ChatStreamChunk> {
    for (const chunk of this.before) yield chunk;
    this.reached.resolve(request);
    const outcome = await this.gate.promise;
    if ('error' in outcome) throw outcome.error;
    yield* outcome.chunks;
  }
}

let providerCallIds = 0;

/** A tool call as a provider reports it; `args` objects are sent as JSON, strings as given. */
export function newToolCall(name: string, args: unknown = {}, id?: string): ToolCall {
  return {
    id: id ?? `provider_call_${++providerCallIds}`,
    type: 'function',
    function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
  };
}

/** The definition of the echo tool the specs offer the model. */
export const ECHO_DEFINITION: ToolDefinition = {
  name: 'echo',
  description: 'Echoes its text',
  parameters: { type: 'object', properties: { text: { type: 'string' } } },
};

/** The echo tool: answers `{ echoed: text }`; records each call in `seen` when given. */
export function newEchoTool(seen?: { args: unknown; ctx: ToolCallContext }[]): ToolSpec {
  return {
    ...ECHO_DEFINITION,
    handler: (args: { text?: string }, ctx) => {
      seen?.push({ args, ctx });
      return { echoed: args.text };
    },
  };
}

/** Factories of scripted answers. */
export const answers = {
  /** A text answer, optionally with reported usage. */
  text: (text: string, usage?: ProviderUsage): ModelStep => ({
    chunks: [{ contentDelta: text }, ...(usage ? [{ usage }] : [])],
  }),
  /** An answer asking for tool calls, with optional text before them. */
  tools: (calls: ToolCall[], text = '', usage?: ProviderUsage): ModelStep => ({
    chunks: [
      ...(text ? [{ contentDelta: text }] : []),
      { toolCalls: calls },
      ...(usage ? [{ usage }] : []),
    ],
  }),
  /** Exactly these chunks. */
  chunks: (...chunks: ChatStreamChunk[]): ModelStep => ({ chunks }),
  /** The call fails with `error` before any chunk. */
  error: (error: Error): ModelStep => ({ error }),
};

// ---------------------------------------------------------------------------------------------
// Engine ports
// ---------------------------------------------------------------------------------------------

/** The mocked collaborators of a turn. */
export interface TurnMocks {
  sessions: AutoMocked<MemorySessionStore>;
  history: AutoMocked<MemoryMessageLog>;
  archive: AutoMocked<MemoryMessageLog>;
  events: RecordingEventBus;
  lane: AutoMocked<LaneHandle>;
}

/** What `newTurnDeps` builds. */
export interface TurnFixture {
  /** The full engine vocabulary: it satisfies the `Pick` every phase takes. */
  deps: EnginePorts;
  mocks: TurnMocks;
  provider: ScriptedModel;
}

/** Options of `newTurnDeps`. */
export interface TurnDepsOptions {
  /** Module options (defaults applied by `resolveAgentOptions`). */
  agent?: AgentModuleOptions;
  /**
   * The model provider; `null` for none (model resolution fails; the fixture then hands back an
   * unregistered `ScriptedModel` that is never called).
   */
  provider?: ScriptedModel | null;
}

/**
 * The `EnginePorts`: real hooks, prompts, tools, models and usage around `estimator` (one per
 * spec file: it owns worker threads), strict mocks for the stores and the lane, a recording
 * event bus and the no-op default instrumentation.
 */
export function newTurnDeps(estimator: TokenEstimator, options: TurnDepsOptions = {}): TurnFixture {
  const provider = options.provider === undefined ? new ScriptedModel() : options.provider;
  const agent = resolveAgentOptions({
    systemPrompt: 'You are the test assistant.',
    ...options.agent,
  });
  const mocks: TurnMocks = {
    sessions: automock(MemorySessionStore),
    history: automock(MemoryMessageLog),
    archive: automock(MemoryMessageLog),
    events: new RecordingEventBus(),
    lane: strictMock<LaneHandle>('LaneHandle', ['takePending', 'closeInsertions']),
  };
  const deps: EnginePorts = {
    hooks: new HookRegistry(),
    prompts: new PromptAssembler(),
    tools: new ToolRegistry(),
    models: new ModelRegistry(provider ? [provider] : [], agent),
    sessions: mocks.sessions,
    history: mocks.history,
    archive: mocks.archive,
    inbox: new MemoryInputInbox(),
    events: mocks.events.asBus(),
    usage: new UsageTracker(estimator),
    estimator,
    options: agent,
    instrumentation: new AgentInstrumentation(),
    approvals: new ApprovalRegistry(),
  };
  return { deps, mocks, provider: provider ?? new ScriptedModel() };
}

/**
 * Backs the history and archive mocks with one in-memory log (reads see what was appended) and
 * returns it. Methods the turn does not use stay strict.
 */
export function useMemoryLog(mocks: TurnMocks, log = new MemoryMessageLog()): MemoryMessageLog {
  mocks.archive.append.mockImplementation((messages) => log.append(messages));
  mocks.history.history.mockImplementation((sessionId, query) => log.history(sessionId, query));
  mocks.history.readonlyHistory.mockImplementation((sessionId, query) =>
    log.readonlyHistory(sessionId, query),
  );
  mocks.history.count.mockImplementation((sessionId) => log.count(sessionId));
  return log;
}

let storedIds = 0;

/** An archive mock implementation that stores nothing and returns the messages with new ids. */
export function echoAppend(messages: NewMessage[]): Promise<Message[]> {
  return Promise.resolve(
    messages.map((m) => ({
      ...m,
      id: `stored-${++storedIds}`,
      createdAt: new Date(0).toISOString(),
    })),
  );
}

// ---------------------------------------------------------------------------------------------
// Data factories
// ---------------------------------------------------------------------------------------------

/** The session of the inputs the factories build. */
export const SESSION_ID = 'session-1';

/** An input; a human web message unless overridden. */
export function newIncoming(overrides: Partial<IncomingMessage> = {}): IncomingMessage {
  return {
    sessionId: SESSION_ID,
    content: 'Hello there',
    platform: 'web',
    userId: 'user-1',
    ...overrides,
  };
}

/** An input on its way, with its settlement. */
export function newPending(overrides: Partial<IncomingMessage> = {}): PendingInput {
  return pendingInput(newIncoming(overrides));
}

let turnIds = 0;

/** A turn of `inputs` (one human input by default); source and session from the first input. */
export function newTurn(inputs: Partial<IncomingMessage>[] = [{}], id = `turn-${++turnIds}`): Turn {
  const pending = inputs.map((i) => newPending(i));
  const lead = pending[0]?.message ?? newIncoming();
  const turn = new Turn(id, lead.sessionId, lead.source);
  for (const p of pending) turn.add(p);
  return turn;
}

/** A turn state with the model resolved from `deps` (as the runner does) and the settings given. */
export function newState(
  deps: Pick<EnginePorts, 'models'>,
  turn: Turn = newTurn(),
  settings?: Partial<SessionSettings>,
): TurnState {
  const state = new TurnState(turn);
  state.settings = settings ? { sessionId: turn.sessionId, ...settings } : undefined;
  state.model = deps.models.resolve(state.settings?.model);
  return state;
}

/** A system prompt message as the runner builds it. */
export function newSystemMessage(content = 'You are the test assistant.'): ModelMessage {
  return { role: 'system', content, metadata: { injector: 'persona', bucket: 'persona' } };
}

/** A message from history. */
export function newHistoryMessage(
  role: 'user' | 'assistant',
  content: string,
  id = `history-${++storedIds}`,
): ModelMessage {
  return { role, content, metadata: { historyId: id } };
}

/** A turn input as a user message for the model. */
export function newInputMessage(content = 'Hello there'): ModelMessage {
  return { role: 'user', content, metadata: { [TURN_INPUT_FLAG]: true } };
}
