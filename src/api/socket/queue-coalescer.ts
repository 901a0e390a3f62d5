import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { QueueEvent } from '../../contracts';
import { AgentGateway } from './agent.gateway';
import { mapQueue } from './socket-events';

/** Shortest time between two `queue` messages of one session. */
export const QUEUE_WINDOW_MS = 50;

/** A session's open window: when it closes, the latest event seen during it is sent. */
interface Window {
  timer: NodeJS.Timeout;
  latest?: QueueEvent;
}

/**
 * Sends `agent:queue` to the socket as `queue`, at most once per session per
 * {@link QUEUE_WINDOW_MS}: the first event of a quiet session goes out at once and opens a
 * window; events during the window only replace the one kept, which goes out when it closes
 * (and opens the next). So a burst of inputs costs subscribers a few messages, the last always
 * carrying the final list. A session nobody subscribed to costs a room lookup: nothing is
 * copied or encoded.
 */
@Injectable()
export class QueueCoalescer implements OnModuleDestroy {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly gateway: AgentGateway) {}

  /** Takes one `agent:queue` event. */
  push(event: QueueEvent): void {
    const window = this.windows.get(event.sessionId);
    if (window) {
      window.latest = event;
      return;
    }
    if (this.gateway.hasSubscribers(event.sessionId)) this.send(event);
  }

  /** Sends what is kept, so that subscribers end with the last list; no window stays open. */
  onModuleDestroy(): void {
    const kept = [...this.windows.values()];
    this.windows.clear();
    for (const { timer, latest } of kept) {
      clearTimeout(timer);
      if (latest) this.gateway.emitToSession(latest.sessionId, 'queue', mapQueue(latest));
    }
  }

  private send(event: QueueEvent): void {
    this.gateway.emitToSession(event.sessionId, 'queue', mapQueue(event));
    const timer = setTimeout(() => this.close(event.sessionId), QUEUE_WINDOW_MS);
    // A pending trailing send must not keep the process alive.
    timer.unref();
    this.windows.set(event.sessionId, { timer });
  }

  private close(sessionId: string): void {
    const latest = this.windows.get(sessionId)?.latest;
    this.windows.delete(sessionId);
    if (latest && this.gateway.hasSubscribers(sessionId)) this.send(latest);
  }
}
