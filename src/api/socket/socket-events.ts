import type {
  IncomingMessage,
  OutgoingMessage,
  QueueEvent,
  StreamEvent,
  TokenUsageEvent,
  ToolExecuteEvent,
  TurnEndEvent,
  TurnOutcome,
  TurnStartEvent,
} from '../../contracts';
import type { ErrorBody } from '../http/api-error';

/** The Socket.IO namespace of the agent (README.md, "Socket.IO (namespace `/agent`)"). */
export const AGENT_NAMESPACE = '/agent';

/** Room of one session's subscribers. */
export const sessionRoom = (sessionId: string) => `session:${sessionId}`;

/** Room of the subscribers of every session (admin dashboards). */
export const ALL_SESSIONS_ROOM = 'sessions:*';

/** Server event `turn`. */
export interface SocketTurnEvent {
  sessionId: string;
  turnId: string;
  phase: 'start' | 'end';
  outcome?: TurnOutcome;
  error?: string;
}

/** Server event `tool` (arguments and results stay on the server). */
export interface SocketToolEvent {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  phase: 'start' | 'end';
  ok?: boolean;
}

/** Payload of the client event `subscribe`. */
export type SubscribePayload = { sessionId: string } | { all: true };

/** Payload of the client event `abort`. */
export interface SocketAbortPayload {
  sessionId: string;
  turnId?: string;
  queued?: boolean;
  reason?: string;
}

/** Events the server sends (README.md, "Socket.IO (namespace `/agent`)"). */
export interface ServerToClientEvents {
  turn: (event: SocketTurnEvent) => void;
  stream: (event: StreamEvent) => void;
  message: (event: OutgoingMessage) => void;
  queue: (event: QueueEvent) => void;
  usage: (event: TokenUsageEvent) => void;
  tool: (event: SocketToolEvent) => void;
}

/** Events clients send, with their acks; a refused payload is acked with an `ErrorBody`. */
export interface ClientToServerEvents {
  subscribe: (payload: SubscribePayload, ack: (answer: { ok: true } | ErrorBody) => void) => void;
  message: (
    payload: IncomingMessage,
    ack: (answer: { accepted: true } | ErrorBody) => void,
  ) => void;
  abort: (
    payload: SocketAbortPayload,
    ack: (answer: { stopped: boolean } | ErrorBody) => void,
  ) => void;
}

/** A server event name. */
export type ServerEventName = keyof ServerToClientEvents;

/** The payload of a server event. */
export type ServerEventPayload<E extends ServerEventName> = Parameters<ServerToClientEvents[E]>[0];

// ---- mapping of the agent's events to the socket's ------------------------------------------

const defined = <T extends object>(value: T): T =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;

/** `agent:turn:start` -> `turn` (phase start). */
export function mapTurnStart(event: TurnStartEvent): SocketTurnEvent {
  return { sessionId: event.sessionId, turnId: event.turnId, phase: 'start' };
}

/** `agent:turn:end` -> `turn` (phase end). */
export function mapTurnEnd(event: TurnEndEvent): SocketTurnEvent {
  return defined<SocketTurnEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    phase: 'end',
    outcome: event.outcome,
    error: event.error,
  });
}

/** `outbound:stream` -> `stream`. */
export function mapStream(event: StreamEvent): StreamEvent {
  return defined<StreamEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    delta: event.delta,
    reasoningDelta: event.reasoningDelta,
    done: event.done,
  });
}

/** `outbound:message` -> `message` (a copy: the engine keeps its own). */
export function mapOutbound(event: OutgoingMessage): OutgoingMessage {
  return { ...event };
}

/** `agent:queue` -> `queue`. */
export function mapQueue(event: QueueEvent): QueueEvent {
  return { sessionId: event.sessionId, waiting: [...(event.waiting ?? [])] };
}

/** `token:usage` -> `usage`. */
export function mapUsage(event: TokenUsageEvent): TokenUsageEvent {
  return { ...event };
}

/** `tool:execute` -> `tool`, without arguments and results. */
export function mapTool(event: ToolExecuteEvent): SocketToolEvent {
  return defined<SocketToolEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    callId: event.callId,
    name: event.name,
    phase: event.phase,
    ok: event.ok,
  });
}
