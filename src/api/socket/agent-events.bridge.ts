import { Injectable, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import type {
  AgentEventMap,
  ApprovalEvent,
  OutgoingMessage,
  QueueEvent,
  SessionDeletedEvent,
  StreamEvent,
  TokenUsageEvent,
  ToolExecuteEvent,
  TurnEndEvent,
  TurnStartEvent,
} from '../../contracts';
import type { EventRelay } from '../../agent';
import { RemoteTurns } from '../replay/remote-turns';
import { TurnFeed } from '../replay/turn-feed';
import { AgentGateway } from './agent.gateway';
import { QueueCoalescer } from './queue-coalescer';
import {
  mapApproval,
  mapOutbound,
  mapStream,
  mapTool,
  mapTurnEnd,
  mapTurnStart,
  mapUsage,
} from './socket-events';

/** The agent events the bridge delivers, by name. */
type BridgedEvents = Pick<
  AgentEventMap,
  | 'agent:turn:start'
  | 'agent:turn:end'
  | 'outbound:stream'
  | 'outbound:message'
  | 'agent:queue'
  | 'token:usage'
  | 'tool:execute'
  | 'session:deleted'
  | 'agent:approval'
>;

type BridgedName = keyof BridgedEvents;

/**
 * Bridges the agent's events to the socket's: `agent:turn:start`/`agent:turn:end` -> `turn`,
 * `outbound:stream` -> `stream`, `outbound:message` -> `message`, `agent:queue` -> `queue`,
 * `token:usage` -> `usage`, `tool:execute` -> `tool`, `agent:approval` -> `approval`. Synchronous and non-throwing: the turn
 * that emits never waits for a socket.
 *
 * The events of a turn's stream are kept in the replay buffer (through the {@link TurnFeed},
 * which also hands them to the SSE routes) in the same call that
 * sends them: a `subscribe` with `resume` reads the buffer and joins the room in one tick, so
 * each event is either in its replay or sent to it live, never both, never neither.
 *
 * Distributed mode: each instance delivers to its own clients only, and the events it emits go
 * to the others through the agent's `EventRelay` (one ordered channel), which deliver them the
 * same way; so every instance's buffer and clients see each session's events in one order, and
 * a client resumes on any instance exactly as on the one that ran the turn.
 */
@Injectable()
export class AgentEventsBridge implements OnApplicationBootstrap, OnModuleDestroy {
  private relay?: EventRelay;
  private stopRelay?: () => void;
  private readonly delivery: Delivery;

  constructor(
    gateway: AgentGateway,
    queues: QueueCoalescer,
    feed: TurnFeed,
    private readonly remote: RemoteTurns,
  ) {
    this.delivery = { gateway, queues, feed };
  }

  onApplicationBootstrap(): void {
    const relay = this.remote.eventRelay;
    if (!relay) return;
    this.relay = relay;
    this.delivery.gateway.deliverLocally();
    this.stopRelay = relay.onRemote(({ name, event }) => {
      if (name in DELIVER) this.deliver(name as BridgedName, event);
    });
  }

  onModuleDestroy(): void {
    this.stopRelay?.();
  }

  @OnEvent('agent:turn:start')
  turnStart(event: TurnStartEvent): void {
    this.local('agent:turn:start', event);
  }

  @OnEvent('agent:turn:end')
  turnEnd(event: TurnEndEvent): void {
    this.local('agent:turn:end', event);
  }

  @OnEvent('outbound:stream')
  stream(event: StreamEvent): void {
    this.local('outbound:stream', event);
  }

  @OnEvent('outbound:message')
  message(event: OutgoingMessage): void {
    this.local('outbound:message', event);
  }

  /** Coalesced per session (bursts of inputs would otherwise send the list once per input). */
  @OnEvent('agent:queue')
  queue(event: QueueEvent): void {
    this.local('agent:queue', event);
  }

  @OnEvent('token:usage')
  usage(event: TokenUsageEvent): void {
    this.local('token:usage', event);
  }

  @OnEvent('tool:execute')
  tool(event: ToolExecuteEvent): void {
    this.local('tool:execute', event);
  }

  /** Tool calls waiting for a person's approval, and their decisions (issue 20). */
  @OnEvent('agent:approval')
  approval(event: ApprovalEvent): void {
    this.local('agent:approval', event);
  }

  /**
   * A deleted session's streams are not resumable any more: here at once, and (distributed
   * mode) in Redis before the deletion ends; the other instances forget them when told.
   */
  @OnEvent('session:deleted')
  sessionDeleted(event: SessionDeletedEvent): Promise<void> | undefined {
    this.local('session:deleted', event);
    return this.relay?.flush();
  }

  /** An event emitted here: delivered to this instance's clients, and relayed to the others. */
  private local<N extends BridgedName>(name: N, event: BridgedEvents[N]): void {
    this.deliver(name, event);
    this.relay?.publish(name, event);
  }

  private deliver<N extends BridgedName>(name: N, event: BridgedEvents[N]): void {
    (DELIVER[name] as (bridge: Delivery, event: BridgedEvents[N]) => void)(this.delivery, event);
  }
}

/** What delivering an event uses. */
interface Delivery {
  gateway: AgentGateway;
  queues: QueueCoalescer;
  feed: TurnFeed;
}

/**
 * How each event reaches this instance's replay buffer, SSE routes and sockets. An event of a
 * turn's stream the buffer had already (relayed after a backfill) is not sent again.
 */
const DELIVER: { [N in BridgedName]: (d: Delivery, event: BridgedEvents[N]) => void } = {
  'agent:turn:start': ({ feed, gateway }, event) => {
    if (feed.record('agent:turn:start', event)) {
      gateway.emitToSession(event.sessionId, 'turn', mapTurnStart(event));
    }
  },
  'agent:turn:end': ({ feed, gateway }, event) => {
    if (feed.record('agent:turn:end', event)) {
      gateway.emitToSession(event.sessionId, 'turn', mapTurnEnd(event));
    }
  },
  'outbound:stream': ({ feed, gateway }, event) => {
    if (feed.record('outbound:stream', event)) {
      gateway.emitToSession(event.sessionId, 'stream', mapStream(event));
    }
  },
  'outbound:message': ({ gateway }, event) => {
    gateway.emitToSession(event.sessionId, 'message', mapOutbound(event));
  },
  'agent:queue': ({ feed, queues }, event) => {
    feed.queue(event);
    queues.push(event);
  },
  'token:usage': ({ feed, gateway }, event) => {
    feed.usage(event);
    gateway.emitToSession(event.sessionId, 'usage', mapUsage(event));
  },
  'tool:execute': ({ feed, gateway }, event) => {
    if (feed.record('tool:execute', event)) {
      gateway.emitToSession(event.sessionId, 'tool', mapTool(event));
    }
  },
  'agent:approval': ({ gateway }, event) => {
    gateway.emitToSession(event.sessionId, 'approval', mapApproval(event));
  },
  'session:deleted': ({ feed }, event) => {
    feed.forgetSession(event.sessionId);
  },
};
