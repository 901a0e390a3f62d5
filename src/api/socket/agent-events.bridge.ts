import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import type {
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
 */
@Injectable()
export class AgentEventsBridge {
  constructor(
    private readonly gateway: AgentGateway,
    private readonly queues: QueueCoalescer,
    private readonly feed: TurnFeed,
  ) {}

  @OnEvent('agent:turn:start')
  turnStart(event: TurnStartEvent): void {
    this.feed.record('agent:turn:start', event);
    this.gateway.emitToSession(event.sessionId, 'turn', mapTurnStart(event));
  }

  @OnEvent('agent:turn:end')
  turnEnd(event: TurnEndEvent): void {
    this.feed.record('agent:turn:end', event);
    this.gateway.emitToSession(event.sessionId, 'turn', mapTurnEnd(event));
  }

  @OnEvent('outbound:stream')
  stream(event: StreamEvent): void {
    this.feed.record('outbound:stream', event);
    this.gateway.emitToSession(event.sessionId, 'stream', mapStream(event));
  }

  @OnEvent('outbound:message')
  message(event: OutgoingMessage): void {
    this.gateway.emitToSession(event.sessionId, 'message', mapOutbound(event));
  }

  /** Coalesced per session (bursts of inputs would otherwise send the list once per input). */
  @OnEvent('agent:queue')
  queue(event: QueueEvent): void {
    this.feed.queue(event);
    this.queues.push(event);
  }

  @OnEvent('token:usage')
  usage(event: TokenUsageEvent): void {
    this.feed.usage(event);
    this.gateway.emitToSession(event.sessionId, 'usage', mapUsage(event));
  }

  @OnEvent('tool:execute')
  tool(event: ToolExecuteEvent): void {
    this.feed.record('tool:execute', event);
    this.gateway.emitToSession(event.sessionId, 'tool', mapTool(event));
  }

  /** Tool calls waiting for a person's approval, and their decisions (issue 20). */
  @OnEvent('agent:approval')
  approval(event: ApprovalEvent): void {
    this.gateway.emitToSession(event.sessionId, 'approval', mapApproval(event));
  }

  /** A deleted session's streams are not resumable any more. */
  @OnEvent('session:deleted')
  sessionDeleted(event: SessionDeletedEvent): void {
    this.feed.forgetSession(event.sessionId);
  }
}
