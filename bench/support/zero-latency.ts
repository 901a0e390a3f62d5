/**
 * The steady turn of the performance benchmarks (issue 15), shared by every bench that measures
 * it: a zero-latency streaming model in this process (no HTTP), a 50-message history window,
 * one tool call per turn, five no-op hooks, one prompt contribution, in-memory stores. The
 * model answers a user message with a `lookup` tool call and the tool result with a text
 * streamed in `ANSWER_CHUNKS` chunks; usage is reported on the last chunk.
 */
import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import {
  AgentModule,
  AgentService,
  type AgentModuleOptions,
  HookRegistry,
  MemoryMessageLog,
  PromptAssembler,
  ToolRegistry,
  type ChatRequest,
  type ChatStreamChunk,
  type HistoryQuery,
  type HistoryStore,
  type LlmProvider,
  type Message,
  type ModelCapabilities,
  type ModelMessage,
} from '../../src';

/** Chunks of the streamed answer. */
export const ANSWER_CHUNKS = 8;
/** The history window of the steady turn. */
export const HISTORY_LIMIT = 50;
/** Turns run before measuring, so the window is full. */
export const WARM_UP_TURNS = 20;

const CAPABILITIES: ModelCapabilities = {
  contextWindow: 128_000,
  maxOutputTokens: 4_096,
  vision: false,
  tools: true,
};

const ANSWER = 'The lookup says the answer is forty-two, as it always was and will be.';

/** The answer cut into `count` pieces (at least one character each past the text's length). */
function piecesOf(count: number): string[] {
  const text = ANSWER.padEnd(count, '.');
  return Array.from({ length: count }, (_, i) =>
    text.slice(Math.floor((i * text.length) / count), Math.floor(((i + 1) * text.length) / count)),
  );
}
const PIECES = piecesOf(ANSWER_CHUNKS);

let callIds = 0;

/**
 * What the zero-latency model answers to `messages`: a tool call, or the streamed text in
 * `pieces` chunks.
 */
export function* answerChunks(
  messages: readonly ModelMessage[],
  pieces: readonly string[] = PIECES,
): Generator<ChatStreamChunk> {
  const last = messages[messages.length - 1];
  if (last?.role !== 'tool') {
    yield {
      toolCalls: [
        {
          id: `call_${++callIds}`,
          type: 'function',
          function: { name: 'lookup', arguments: '{"q":"the answer"}' },
        },
      ],
      usage: { promptTokens: 900, completionTokens: 12 },
    };
    return;
  }
  for (let i = 0; i < pieces.length; i++) {
    yield i === pieces.length - 1
      ? { contentDelta: pieces[i], usage: { promptTokens: 950, completionTokens: 16 } }
      : { contentDelta: pieces[i] };
  }
}

/** A streaming model with no latency at all: every chunk is ready at once. */
export class ZeroLatencyProvider implements LlmProvider {
  readonly id = 'zero';
  readonly defaultModel = 'gpt-4o-mini';
  calls = 0;
  private readonly pieces: string[];

  /** `chunks`: how many chunks the answer streams in. */
  constructor(chunks = ANSWER_CHUNKS) {
    this.pieces = piecesOf(chunks);
  }

  capabilities(): ModelCapabilities {
    return CAPABILITIES;
  }

  async chat(request: ChatRequest) {
    let content = '';
    let toolCalls;
    for (const chunk of answerChunks(request.messages, this.pieces)) {
      content += chunk.contentDelta ?? '';
      toolCalls ??= chunk.toolCalls;
    }
    return { content, toolCalls };
  }

  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk> {
    this.calls++;
    yield* answerChunks(request.messages, this.pieces);
  }
}

/** The `lookup` tool of the steady turn. */
export const LOOKUP_TOOL = {
  name: 'lookup',
  description: 'Looks a question up and returns what it found.',
  parameters: {
    type: 'object',
    properties: { q: { type: 'string', description: 'the question' } },
    required: ['q'],
  },
  handler: () => 'forty-two',
};

/**
 * A host's own history store: fresh objects on every read (as a database or an ORM gives back)
 * and no stored token counts (the store does not keep `metadata.tokenCount`). Each record is
 * mapped field by field into a new object, as this project's SQL store maps a row: a cheap copy,
 * so that what the bench measures is the agent's work with such a store, not the store's (an
 * object-rest copy of the frozen records cost twice as much, 25 µs a turn on one machine).
 */
export class HostHistoryStore implements HistoryStore {
  constructor(private readonly inner: MemoryMessageLog) {}

  async history(sessionId: string, query?: HistoryQuery): Promise<Message[]> {
    return (await this.inner.readonlyHistory(sessionId, query)).map(hostRow);
  }

  count(sessionId: string): Promise<number> {
    return this.inner.count(sessionId);
  }

  clear(sessionId?: string): Promise<void> {
    return this.inner.clear(sessionId);
  }

  rollbackTurn(sessionId: string, turnId: string): Promise<number> {
    return this.inner.rollbackTurn(sessionId, turnId);
  }

  deleteSession(sessionId: string): Promise<void> {
    return this.inner.deleteSession(sessionId);
  }
}

/** One stored record as a host's store returns it: a fresh object without a token count. */
function hostRow(row: Readonly<Message>): Message {
  const metadata: Record<string, unknown> = {};
  for (const key in row.metadata) {
    if (key !== 'tokenCount') metadata[key] = row.metadata[key];
  }
  const message: Message = {
    id: row.id,
    sessionId: row.sessionId,
    role: row.role,
    content: row.content,
    metadata,
    createdAt: row.createdAt,
  };
  if (row.kind !== undefined) message.kind = row.kind;
  if (row.toolCalls !== undefined) {
    message.toolCalls = row.toolCalls.map(({ id, type, function: { name, arguments: args } }) => ({
      id,
      type,
      function: { name, arguments: args },
    }));
  }
  if (row.toolCallId !== undefined) message.toolCallId = row.toolCallId;
  if (row.reasoningContent !== undefined) message.reasoningContent = row.reasoningContent;
  if (row.key !== undefined) message.key = row.key;
  return message;
}

/** An agent set up for the steady turn. */
export interface SteadyAgent {
  app: INestApplicationContext;
  agent: AgentService;
  provider: ZeroLatencyProvider;
  /** The memory log behind the history (and the archive). */
  log: MemoryMessageLog;
  /** The history store the agent reads: the log, or a `HostHistoryStore` in front of it. */
  history: HistoryStore;
  close(): Promise<void>;
}

/** Variations of the steady turn. */
export interface SteadyOptions {
  /** Put a `HostHistoryStore` in front of the memory log. */
  hostStore?: boolean;
  /** Chunks of the streamed answer (default `ANSWER_CHUNKS`). */
  chunks?: number;
  /** More no-op middlewares on `agent:llm:before` (run twice per turn), besides the five. */
  extraHooks?: number;
  /** Another model than the zero-latency one (e.g. one that paces its chunks). */
  provider?: ZeroLatencyProvider;
  /** Trimming options of the agent (e.g. a larger history share). */
  trimming?: AgentModuleOptions['trimming'];
}

/** Builds the agent of the steady turn. */
export async function steadyAgent(options: SteadyOptions = {}): Promise<SteadyAgent> {
  const provider = options.provider ?? new ZeroLatencyProvider(options.chunks);
  const log = new MemoryMessageLog();
  const history: HistoryStore = options.hostStore ? new HostHistoryStore(log) : log;
  @Module({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      AgentModule.forRoot({
        llmProvider: provider,
        historyLimit: HISTORY_LIMIT,
        systemPrompt: 'You are a helpful assistant. Answer briefly and look things up first.',
        messageArchive: log,
        historyStore: history,
        ...(options.trimming ? { trimming: options.trimming } : {}),
      }),
    ],
  })
  class SteadyModule {}
  const app = await NestFactory.createApplicationContext(SteadyModule, { logger: false });
  app.get(ToolRegistry).register(LOOKUP_TOOL);
  const hooks = app.get(HookRegistry);
  for (const name of [
    'agent:input:before',
    'agent:turn:before',
    'agent:llm:before',
    'agent:llm:after',
    'agent:turn:after',
  ]) {
    hooks.use(name, async (_ctx, next) => next());
  }
  for (let i = 0; i < (options.extraHooks ?? 0); i++) {
    hooks.use('agent:llm:before', async (_ctx, next) => next());
  }
  app.get(PromptAssembler).register({
    key: 'persona-note',
    bucket: 'persona',
    build: () => 'Keep answers under three sentences.',
  });
  return { app, agent: app.get(AgentService), provider, log, history, close: () => app.close() };
}

/**
 * The same model and tool calls without the agent: the provider streamed twice per turn (tool
 * call, then answer), the tool run, the messages kept in a plain array cut to the window.
 */
export async function bareTurn(
  provider: ZeroLatencyProvider,
  history: ModelMessage[],
  question: string,
): Promise<void> {
  const signal = new AbortController().signal;
  history.push({ role: 'user', content: question });
  let toolCalls;
  for await (const chunk of provider.stream({ model: 'bare', messages: history, signal })) {
    toolCalls ??= chunk.toolCalls;
  }
  history.push({ role: 'assistant', content: '', toolCalls });
  for (const call of toolCalls ?? []) {
    history.push({ role: 'tool', toolCallId: call.id, content: String(LOOKUP_TOOL.handler()) });
  }
  let answer = '';
  for await (const chunk of provider.stream({ model: 'bare', messages: history, signal })) {
    answer += chunk.contentDelta ?? '';
  }
  history.push({ role: 'assistant', content: answer });
  if (history.length > HISTORY_LIMIT) history.splice(0, history.length - HISTORY_LIMIT);
}
