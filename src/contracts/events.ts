import type { IncomingMessage, OutgoingMessage } from './messages';
import type { TurnEnd } from './turn';
import type { TokenUsageEvent } from './usage';

/** `agent:queue` (S8): the session's waiting inputs, in arrival order. */
export interface QueueEvent {
  sessionId: string;
  waiting: IncomingMessage[];
}

/** `outbound:stream`: a chunk of the running answer; `done` is the stream-end marker (I9). */
export interface StreamEvent {
  sessionId: string;
  turnId?: string;
  delta?: string;
  reasoningDelta?: string;
  done?: boolean;
}

/** `agent:turn:start`. */
export interface TurnStartEvent {
  sessionId: string;
  turnId: string;
  source?: string;
  inputs: IncomingMessage[];
}

/** `agent:turn:end`: how the turn ended, with its session. */
export interface TurnEndEvent extends TurnEnd {
  sessionId: string;
}

/** `tool:execute`: a tool call starts or ends. */
export interface ToolExecuteEvent {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  phase: 'start' | 'end';
  args?: unknown;
  ok?: boolean;
  result?: string;
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
} as const satisfies Record<string, AgentEventName>;
