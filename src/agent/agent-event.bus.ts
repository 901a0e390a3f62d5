import { Injectable, Logger, Optional } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { AgentEventMap, AgentEventName } from '../contracts';

/**
 * Typed, fire-and-forget wrapper over `EventEmitter2` for the agent's events. Observers never
 * break a turn: a throwing or rejecting listener is logged and ignored, and the turn never
 * awaits a listener.
 */
@Injectable()
export class AgentEventBus {
  private readonly logger = new Logger('AgentEvents');

  constructor(@Optional() readonly emitter?: EventEmitter2) {
    if (!emitter) {
      throw new Error(
        'AgentModule needs @nestjs/event-emitter: add EventEmitterModule.forRoot({ delimiter: ":", wildcard: true }) to your root module imports',
      );
    }
  }

  /** Emits an event to its listeners without waiting for them. */
  emit<K extends AgentEventName>(name: K, payload: AgentEventMap[K]): void {
    try {
      this.emitter!.emit(name, payload);
    } catch (error) {
      this.logger.warn(`A listener of ${name} threw: ${(error as Error).message}`);
    }
  }

  /** Whether anybody listens to `name` (wildcards included): lets a busy emitter skip work. */
  hasListeners(name: AgentEventName): boolean {
    return this.emitter!.hasListeners(name) === true;
  }

  /**
   * Emits an event and waits for its listeners; a listener's error rejects. For the events whose
   * listeners are part of the work (`session:deleted`, S7), never for notifications.
   */
  emitAsync<K extends AgentEventName>(name: K, payload: AgentEventMap[K]): Promise<unknown[]> {
    return this.emitter!.emitAsync(name, payload);
  }

  /** Subscribes a listener; returns a function that removes it. */
  on<K extends AgentEventName>(
    name: K,
    listener: (payload: AgentEventMap[K]) => unknown,
  ): () => void {
    this.emitter!.on(name, listener as (...args: unknown[]) => unknown);
    return () => this.emitter!.off(name, listener as (...args: unknown[]) => unknown);
  }
}
