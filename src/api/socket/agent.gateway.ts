import { Injectable, Logger, type Type } from '@nestjs/common';
import {
  ConnectedSocket,
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  type OnGatewayInit,
} from '@nestjs/websockets';
import type { Namespace, Socket } from 'socket.io';
import { withIngress, type Actor } from '../../contracts';
import { MessageDto, SocketAbortDto } from '../agent/agent.dto';
import { SubscribeDto } from './socket.dto';
import { SocketApproveDto } from '../agent/approvals.dto';
import { mapAbortOptions, mapIncomingMessage } from '../agent/agent.mapping';
import { AgentApiService } from '../agent/agent-api.service';
import { retryAfterOf, toErrorBody, type ErrorBody } from '../http/api-error';
import { logFailure } from '../http/api-exception.filter';
import { errorForLog, escapeForLog } from '../http/escape-for-log';
import { validatePayload } from '../http/validation';
import { RemoteTurns } from '../replay/remote-turns';
import { TurnReplayBuffer } from '../replay/turn-replay.buffer';
import { SocketDoors } from './socket-doors';
import {
  ALL_SESSIONS_ROOM,
  sessionRoom,
  mapUsage,
  socketEventOf,
  type ClientToServerEvents,
  type SubscribeAck,
  type ServerEventName,
  type ServerEventPayload,
  type ServerToClientEvents,
} from './socket-events';

/** Per-socket data: who the handshake authenticated. */
interface SocketData {
  /** `undefined` when a host guard admitted a caller it did not name. */
  caller?: Actor;
}

type AgentNamespace = Namespace<ClientToServerEvents, ServerToClientEvents, object, SocketData>;
type AgentSocket = Socket<ClientToServerEvents, ServerToClientEvents, object, SocketData>;

/**
 * Socket.IO namespace of the agent (`/agent` by default; README.md, "Socket.IO (namespace
 * `/agent`)"): only socket plumbing. The class served is made by {@link agentGatewayFor} for
 * the module's namespace; inject this class to reach it.
 * The handshake needs `auth: { token }` (refused: `connect_error`); handshakes and events are
 * limited by `SocketDoors`; `subscribe` joins a session's room (or the all-sessions room), with
 * `resume` after sending the turn's missed stream events (`TurnReplayBuffer`);
 * `message`, `abort` and `approve` go to the agent and are acked, errors in the REST error shape. Server
 * events are sent by `AgentEventsBridge` through `emitToSession`, which never waits for a client.
 */
@Injectable()
export class AgentGateway implements OnGatewayInit<AgentNamespace> {
  private readonly logger = new Logger('AgentGateway');
  private namespace?: AgentNamespace;
  /** Distributed mode: the other instances deliver to their own clients (`AgentEventsBridge`). */
  private localOnly = false;

  constructor(
    private readonly doors: SocketDoors,
    private readonly api: AgentApiService,
    private readonly replay: TurnReplayBuffer,
    private readonly remote: RemoteTurns,
  ) {}

  /**
   * Distributed mode: `emitToSession` reaches this instance's clients only, each instance
   * delivering the events relayed to it (so that the replay buffer and the rooms of every
   * instance follow one order).
   */
  deliverLocally(): void {
    this.localOnly = true;
  }

  afterInit(namespace: AgentNamespace): void {
    this.namespace = namespace;
    namespace.use(this.doors.handshake());
    // Registered before any packet can arrive: the connection event precedes them.
    namespace.on('connection', (socket) => socket.use(this.doors.events(socket)));
  }

  @SubscribeMessage('subscribe')
  subscribe(
    @ConnectedSocket() socket: AgentSocket,
    @MessageBody() payload: unknown,
  ): Promise<SubscribeAck | ErrorBody> {
    return this.guarded(async () => {
      const parsed = await validatePayload(SubscribeDto, payload);
      if ('error' in parsed) return parsed.error;
      const { all, sessionId, resume } = parsed.value;
      if (resume) return this.resume(socket, sessionId!, resume.turnId, resume.afterSeq);
      await socket.join(all ? ALL_SESSIONS_ROOM : sessionRoom(sessionId!));
      return { ok: true as const };
    });
  }

  /**
   * `subscribe` with `resume`: joins the session's room and sends the turn's kept events after
   * `afterSeq`, then acks. NOTE: joining, reading the buffer and sending the replay happen in
   * one tick (Socket.IO's adapters, the Redis one included, add a socket to a room
   * synchronously): every event of the turn emitted before is in the replay, every later one
   * reaches the socket through the room, after the replay in the socket's one ordered queue.
   * A socket already in the room (or in all sessions') would get some events twice: resume on
   * a new connection.
   */
  private async resume(
    socket: AgentSocket,
    sessionId: string,
    turnId: string,
    afterSeq: number,
  ): Promise<SubscribeAck> {
    // Distributed mode: what the turn's instance kept in Redis and this one lacks, first.
    await this.remote.prepareTurn(sessionId, turnId, afterSeq);
    const joined = socket.join(sessionRoom(sessionId));
    const replay = this.replay.replay(sessionId, turnId, afterSeq);
    if (replay.status === 'ok') {
      const emit = (event: string, payload: unknown) =>
        (socket.emit as (event: string, payload: unknown) => boolean)(event, payload);
      for (const entry of replay.entries) {
        const [event, payload] = socketEventOf(entry);
        emit(event, payload);
      }
      // The turn's latest usage report (a snapshot, not numbered) after its missed events.
      if (replay.usage && replay.entries.length > 0) emit('usage', mapUsage(replay.usage));
    }
    await joined;
    return replay.status === 'ok'
      ? { ok: true, resumed: true, replayed: replay.entries.length }
      : { ok: true, resumed: false, reason: replay.status };
  }

  @SubscribeMessage('message')
  message(@MessageBody() payload: unknown): Promise<{ accepted: true } | ErrorBody> {
    return this.guarded(async () => {
      const parsed = await validatePayload(MessageDto, payload);
      if ('error' in parsed) return parsed.error;
      const message = mapIncomingMessage(parsed.value);
      await withIngress('socket', undefined, () => this.api.submit(message, false));
      return { accepted: true as const };
    });
  }

  @SubscribeMessage('abort')
  abort(
    @ConnectedSocket() socket: AgentSocket,
    @MessageBody() payload: unknown,
  ): Promise<{ stopped: boolean } | ErrorBody> {
    return this.guarded(async () => {
      const parsed = await validatePayload(SocketAbortDto, payload);
      if ('error' in parsed) return parsed.error;
      const { sessionId } = parsed.value;
      return this.api.abort(sessionId, mapAbortOptions(parsed.value, socket.data.caller));
    });
  }

  /** Decides a tool call waiting for approval, `by` the handshake's caller; ack `{ decided }`. */
  @SubscribeMessage('approve')
  approve(
    @ConnectedSocket() socket: AgentSocket,
    @MessageBody() payload: unknown,
  ): Promise<{ decided: boolean } | ErrorBody> {
    return this.guarded(async () => {
      const parsed = await validatePayload(SocketApproveDto, payload);
      if ('error' in parsed) return parsed.error;
      const { sessionId, callId, approved, reason } = parsed.value;
      const decision = { approved, ...(reason !== undefined ? { reason } : {}) };
      return { decided: await this.api.decide(sessionId, callId, decision, socket.data.caller) };
    });
  }

  /**
   * Sends a server event to the subscribers of its session and of all sessions. Socket.IO
   * buffers per client, so a slow client never slows the turn that emits.
   */
  emitToSession<E extends ServerEventName>(
    sessionId: string,
    event: E,
    payload: ServerEventPayload<E>,
  ): void {
    if (!this.namespace) return;
    try {
      const target = this.localOnly ? this.namespace.local : this.namespace;
      const rooms = target.to([sessionRoom(sessionId), ALL_SESSIONS_ROOM]);
      (rooms.emit as (event: E, payload: ServerEventPayload<E>) => boolean)(event, payload);
    } catch (error) {
      this.logger.warn(
        `Could not send ${event} for session ${escapeForLog(sessionId)}: ${errorForLog(error)}`,
      );
    }
  }

  /** Whether a client of this instance receives the session's events (its room or all). */
  hasSubscribers(sessionId: string): boolean {
    const rooms = this.namespace?.adapter.rooms;
    return !!(rooms?.get(sessionRoom(sessionId))?.size || rooms?.get(ALL_SESSIONS_ROOM)?.size);
  }

  /**
   * Runs a handler; anything it throws is acked in the error shape (with `retryAfter` when a
   * retry helps, e.g. an unavailable store), never left unanswered.
   */
  private async guarded<T>(work: () => Promise<T>): Promise<T | ErrorBody> {
    try {
      return await work();
    } catch (error) {
      const body = toErrorBody(error);
      logFailure(this.logger, 'Socket handler', error, body.statusCode);
      const retryAfter = retryAfterOf(error);
      return retryAfter === undefined ? body : { ...body, retryAfter };
    }
  }
}

/**
 * The gateway class served on `namespace`: a subclass of {@link AgentGateway} with the
 * namespace in its `@WebSocketGateway` metadata (Nest reads it from the class).
 */
export function agentGatewayFor(namespace: string): Type<AgentGateway> {
  @WebSocketGateway({ namespace })
  class NamespacedAgentGateway extends AgentGateway {}
  return NamespacedAgentGateway;
}
