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
  /**
   * With wildcards on, each name split at the delimiter once: `EventEmitter2` takes a name's
   * parts as an array and then skips splitting the name on every emit (a dozen per turn).
   */
  private readonly parts: Map<string, string[]> | undefined;
  private readonly delimiter: string;

  constructor(@Optional() readonly emitter?: EventEmitter2) {
    if (!emitter) {
      throw new Error(
        'AgentModule needs @nestjs/event-emitter: add EventEmitterModule.forRoot({ delimiter: ":", wildcard: true }) to your root module imports',
      );
    }
    const settings = emitter as unknown as { wildcard?: boolean; delimiter?: string };
    this.delimiter = settings.delimiter ?? '.';
    this.parts = settings.wildcard === true ? new Map() : undefined;
  }

  /** Emits an event to its listeners without waiting for them. */
  emit<K extends AgentEventName>(name: K, payload: AgentEventMap[K]): void {
    try {
      this.emitter!.emit(this.nameOf(name), payload);
    } catch (error) {
      this.logger.warn(`A listener of ${name} threw: ${(error as Error).message}`);
    }
  }

  /** The name as the emitter takes it fastest: split once when wildcards are on. */
  private nameOf(name: string): string | string[] {
    if (!this.parts) return name;
    let parts = this.parts.get(name);
    if (!parts) this.parts.set(name, (parts = name.split(this.delimiter)));
    return parts;
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
