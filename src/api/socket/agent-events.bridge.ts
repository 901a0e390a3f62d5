import { Injectable } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import type {
  OutgoingMessage,
  QueueEvent,
  StreamEvent,
  TokenUsageEvent,
  ToolExecuteEvent,
  TurnEndEvent,
  TurnStartEvent,
} from '../../contracts';
import { AgentGateway } from './agent.gateway';
import { QueueCoalescer } from './queue-coalescer';
import {
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
 * `token:usage` -> `usage`, `tool:execute` -> `tool`. Synchronous and non-throwing: the turn
 * that emits never waits for a socket.
 */
@Injectable()
export class AgentEventsBridge {
  constructor(
    private readonly gateway: AgentGateway,
    private readonly queues: QueueCoalescer,
  ) {}

  @OnEvent('agent:turn:start')
  turnStart(event: TurnStartEvent): void {
    this.gateway.emitToSession(event.sessionId, 'turn', mapTurnStart(event));
  }

  @OnEvent('agent:turn:end')
  turnEnd(event: TurnEndEvent): void {
    this.gateway.emitToSession(event.sessionId, 'turn', mapTurnEnd(event));
  }

  @OnEvent('outbound:stream')
  stream(event: StreamEvent): void {
    this.gateway.emitToSession(event.sessionId, 'stream', mapStream(event));
  }

  @OnEvent('outbound:message')
  message(event: OutgoingMessage): void {
    this.gateway.emitToSession(event.sessionId, 'message', mapOutbound(event));
  }

  /** Coalesced per session (bursts of inputs would otherwise send the list once per input). */
  @OnEvent('agent:queue')
  queue(event: QueueEvent): void {
    this.queues.push(event);
  }

  @OnEvent('token:usage')
  usage(event: TokenUsageEvent): void {
    this.gateway.emitToSession(event.sessionId, 'usage', mapUsage(event));
  }

  @OnEvent('tool:execute')
  tool(event: ToolExecuteEvent): void {
    this.gateway.emitToSession(event.sessionId, 'tool', mapTool(event));
  }
}
