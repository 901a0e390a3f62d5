import type { ApprovalRecord } from './approvals';
import type { IncomingMessage, OutgoingMessage } from './messages';
import type { TurnEnd } from './turn';
import type { TokenUsageEvent } from './usage';

/** `agent:queue` (S8): the session's waiting inputs, in arrival order. */
export interface QueueEvent {
  sessionId: string;
  waiting: IncomingMessage[];
}

/**
 * A turn's stream (README, "Resuming a turn's stream"): `agent:turn:start`, every
 * `outbound:stream` of the turn (deltas, reasoning deltas, the stream-end marker),
 * `tool:execute` (start and end) and `agent:turn:end`, numbered in that one order by `seq`:
 * 1, 2, 3, ... per turn, no gaps. A resuming client replays them by `seq`.
 */
export interface TurnStreamPosition {
  /**
   * The event's place in its turn's stream, from 1. Set by the engine on every event of a turn;
   * absent only on the stream-end marker of an input that never entered a turn (no `turnId`).
   */
  seq?: number;
}

/** `outbound:stream`: a chunk of the running answer; `done` is the stream-end marker (I9). */
export interface StreamEvent extends TurnStreamPosition {
  sessionId: string;
  turnId?: string;
  delta?: string;
  reasoningDelta?: string;
  done?: boolean;
}

/** `agent:turn:start` (the first event of its turn's stream, `seq` 1, unless blocked). */
export interface TurnStartEvent extends TurnStreamPosition {
  sessionId: string;
  turnId: string;
  source?: string;
  inputs: IncomingMessage[];
}

/** `agent:turn:end`: how the turn ended, with its session. */
export interface TurnEndEvent extends TurnEnd, TurnStreamPosition {
  sessionId: string;
}

/** `tool:execute`: a tool call starts or ends. */
export interface ToolExecuteEvent extends TurnStreamPosition {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  phase: 'start' | 'end';
  args?: unknown;
  ok?: boolean;
  result?: string;
}

/**
 * `agent:approval`: a tool call that needs a person's approval waits (`phase: 'requested'`), or
 * stopped waiting (`'decided'`: approved, denied, timed out, or `stopped` by the turn's abort).
 */
export interface ApprovalEvent {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  args: unknown;
  phase: 'requested' | 'decided';
  /** When it started waiting (ISO 8601), on `requested`. */
  requestedAt?: string;
  /** On `decided` (absent when the turn was stopped while it waited). */
  decision?: ApprovalRecord;
  /** On `decided`: the turn was stopped while the call waited. */
  stopped?: true;
}

/** `token:request`: asks for a usage snapshot of a session. */
export interface TokenRequestEvent {
  sessionId: string;
  platform?: string;
}

/** `session:deleted`: a host deletes a session by emitting this with `emitAsync` (S7). */
export interface SessionDeletedEvent {
  sessionId: string;
}

/** The agent's events (`@nestjs/event-emitter`, delimiter `:`). */
export interface AgentEventMap {
  'agent:queue': QueueEvent;
  'token:usage': TokenUsageEvent;
  'token:request': TokenRequestEvent;
  'outbound:message': OutgoingMessage;
  'outbound:stream': StreamEvent;
  'session:deleted': SessionDeletedEvent;
  'agent:turn:start': TurnStartEvent;
  'agent:turn:end': TurnEndEvent;
  'tool:execute': ToolExecuteEvent;
  'agent:approval': ApprovalEvent;
}

/** An agent event name. */
export type AgentEventName = keyof AgentEventMap;

/** Names of the agent's events, for `@OnEvent(AgentEvents.Queue)`. */
export const AgentEvents = {
  Queue: 'agent:queue',
  TokenUsage: 'token:usage',
  TokenRequest: 'token:request',
  OutboundMessage: 'outbound:message',
  OutboundStream: 'outbound:stream',
  SessionDeleted: 'session:deleted',
  TurnStart: 'agent:turn:start',
  TurnEnd: 'agent:turn:end',
  ToolExecute: 'tool:execute',
  Approval: 'agent:approval',
} as const satisfies Record<string, AgentEventName>;
