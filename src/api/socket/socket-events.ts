import type {
  ApprovalEvent,
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
import type { TurnStreamEntry } from '../replay/turn-replay.buffer';

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
  /** Place in the turn's stream (README, "Resuming a turn's stream"). */
  seq?: number;
}

/** Server event `tool` (arguments and results stay on the server). */
export interface SocketToolEvent {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  phase: 'start' | 'end';
  ok?: boolean;
  /** Place in the turn's stream (README, "Resuming a turn's stream"). */
  seq?: number;
}

/**
 * Server event `approval`: a tool call waits for a person's approval (`requested`, with its
 * arguments), or stopped waiting (`decided`: `approved` true or false; absent when its turn was
 * stopped meanwhile). Decide with the client event `approve`.
 */
export interface SocketApprovalEvent {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  args: unknown;
  phase: 'requested' | 'decided';
  approved?: boolean;
}

/** Payload of the client event `approve` (`by` is the handshake's caller). */
export interface SocketApprovePayload {
  sessionId: string;
  callId: string;
  approved: boolean;
  reason?: string;
}

/** Payload of the client event `subscribe`; `resume` replays a turn's missed stream events first. */
export type SubscribePayload =
  { sessionId: string; resume?: { turnId: string; afterSeq: number } } | { all: true };

/**
 * Ack of `subscribe`: `{ ok: true }`; with `resume`, also whether the missed events were sent
 * (`resumed: true`, `replayed` of them, before this ack) or could not be (`resumed: false`: the
 * turn is `unknown` here or ended more than 60 s ago, or its stream is `incomplete`; the client
 * reloads the history instead).
 */
export type SubscribeAck =
  | { ok: true; resumed?: true; replayed?: number }
  | { ok: true; resumed: false; reason: 'unknown' | 'incomplete' };

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
  approval: (event: SocketApprovalEvent) => void;
}

/** Events clients send, with their acks; a refused payload is acked with an `ErrorBody`. */
export interface ClientToServerEvents {
  subscribe: (payload: SubscribePayload, ack: (answer: SubscribeAck | ErrorBody) => void) => void;
  message: (
    payload: IncomingMessage,
    ack: (answer: { accepted: true } | ErrorBody) => void,
  ) => void;
  abort: (
    payload: SocketAbortPayload,
    ack: (answer: { stopped: boolean } | ErrorBody) => void,
  ) => void;
  approve: (
    payload: SocketApprovePayload,
    ack: (answer: { decided: boolean } | ErrorBody) => void,
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
  return defined<SocketTurnEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    phase: 'start',
    seq: event.seq,
  });
}

/** `agent:turn:end` -> `turn` (phase end). */
export function mapTurnEnd(event: TurnEndEvent): SocketTurnEvent {
  return defined<SocketTurnEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    phase: 'end',
    outcome: event.outcome,
    error: event.error,
    seq: event.seq,
  });
}

/** `outbound:stream` -> `stream`. */
export function mapStream(event: StreamEvent): StreamEvent {
  return defined<StreamEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    seq: event.seq,
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
    seq: event.seq,
  });
}

/** `agent:approval` -> `approval` (who decided and why stay on the server). */
export function mapApproval(event: ApprovalEvent): SocketApprovalEvent {
  return defined<SocketApprovalEvent>({
    sessionId: event.sessionId,
    turnId: event.turnId,
    callId: event.callId,
    name: event.name,
    args: event.args,
    phase: event.phase,
    approved: event.decision?.approved,
  });
}

/** A kept event of a turn's stream as the socket event it was sent as. */
export function socketEventOf(
  entry: TurnStreamEntry,
): { [E in 'turn' | 'stream' | 'tool']: [E, ServerEventPayload<E>] }['turn' | 'stream' | 'tool'] {
  switch (entry.name) {
    case 'agent:turn:start':
      return ['turn', mapTurnStart(entry.event)];
    case 'agent:turn:end':
      return ['turn', mapTurnEnd(entry.event)];
    case 'outbound:stream':
      return ['stream', mapStream(entry.event)];
    case 'tool:execute':
      return ['tool', mapTool(entry.event)];
  }
}
