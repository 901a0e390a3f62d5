import type { IncomingMessage, ModelMessage } from './messages';
import type { ChatResponse, ModelRef } from './llm';
import type { ToolCallContext, ToolDefinition } from './tools';
import type { TurnInput, TurnOutcome } from './turn';

/** `agent:input:before`: once per input, before it enters a turn (S5). */
export interface InputBeforeContext {
  /** May be replaced by a middleware before `next`. */
  message: IncomingMessage;
}

/** `agent:turn:before`: a turn starts; `next` runs the whole turn. */
export interface TurnBeforeContext {
  turnId: string;
  sessionId: string;
  /** Live: joined inputs are appended while the turn runs. */
  inputs: TurnInput[];
}

/** `agent:llm:before`: before every model call, including those after tool calls. */
export interface LlmBeforeContext {
  messages: ModelMessage[];
  tools: ToolDefinition[];
  acceptsImages: boolean;
  sessionId: string;
  /** The turn's input source; absent for human turns (H3). */
  source?: string;
  turnId: string;
  platform?: string;
  inputs: readonly TurnInput[];
  model: ModelRef;
  signal: AbortSignal;
}

/** `agent:llm:after`: after every model response. */
export interface LlmAfterContext {
  response: ChatResponse;
  messages: ModelMessage[];
  sessionId: string;
  turnId: string;
}

/** `agent:tool:before`: may rewrite `name` and `args`. */
export interface ToolBeforeContext {
  name: string;
  args: unknown;
  toolCallContext: ToolCallContext;
}

/** `agent:tool:after`: may rewrite `result`; keys written to `metadata` are persisted. */
export interface ToolAfterContext {
  name: string;
  args: unknown;
  result: string;
  /** Whether the call ran and returned without error. */
  ok: boolean;
  toolCallContext: ToolCallContext;
  metadata: Record<string, unknown>;
}

/** `agent:reply:before`: before the reply is finalised; may request a retry. */
export interface ReplyBeforeContext {
  content: string;
  /** What to persist instead of `content`. */
  archiveContent?: string;
  /** Decoded visible text of a structured-output envelope. */
  visibleContent?: string;
  sessionId: string;
  turnId: string;
  platform?: string;
  inputs: readonly TurnInput[];
  /** 0 for the first answer, n for the n-th retry. */
  attempt: number;
  /** Retries allowed; a middleware that requests one sets it. @default 0 */
  maxRetries: number;
  retryRequested?: boolean;
  retryFeedback?: string;
}

/** `agent:turn:after`: the turn ended, on all four outcomes. */
export interface TurnAfterContext {
  inputs: readonly TurnInput[];
  reply: string;
  outcome: TurnOutcome;
  error?: string;
  sessionId: string;
  turnId: string;
}

/**
 * The hook context map: hook name -> context type. Extend it by declaration merging to type
 * your own hooks:
 *
 * ```ts
 * declare module 'nest-agent-orchestrator' {
 *   interface HookContextMap { 'billing:charge': { sessionId: string; cents: number } }
 * }
 * ```
 */
export interface HookContextMap {
  'agent:input:before': InputBeforeContext;
  'agent:turn:before': TurnBeforeContext;
  'agent:llm:before': LlmBeforeContext;
  'agent:llm:after': LlmAfterContext;
  'agent:tool:before': ToolBeforeContext;
  'agent:tool:after': ToolAfterContext;
  'agent:reply:before': ReplyBeforeContext;
  'agent:turn:after': TurnAfterContext;
}

/** A hook name. */
export type HookName = Extract<keyof HookContextMap, string>;

/** Continues the chain; resolves when the rest of the chain (and the default action) is done. */
export type HookNext = () => Promise<void>;

/** An onion middleware. Not calling `next` stops the chain and the default action. */
export type HookMiddleware<C = any> = (ctx: C, next: HookNext) => Promise<void> | void;
