import { Logger } from '@nestjs/common';
import {
  InvalidInputError,
  type DropReason,
  type IncomingMessage,
  type InputBeforeContext,
  type Settlement,
} from '../../contracts';
import type { WorkDispatcher } from '../../contracts';
import { Deferred } from './deferred';
import type { HoldTable } from './holds';
import type { TurnDeps } from './turn-deps';
import { archivedInput } from './turn-state';

/**
 * The way of an input from `handleMessage` to its lane (S1, S5, S7, I11): validation, hold,
 * `agent:input:before`, then, inside its default action, hold again, the generation check and
 * the hand-off to the lane. Resolves once the input is settled.
 */
export class InputGate {
  private readonly logger = new Logger('InputGate');
  /** Local deletion epochs: moved synchronously when a deletion starts (S7). */
  private readonly epochs = new Map<string, number>();
  private closed = false;
  private readonly inFlight = new Set<Promise<Settlement>>();

  constructor(
    private readonly deps: TurnDeps,
    private readonly dispatcher: WorkDispatcher,
    private readonly holds: HoldTable,
  ) {}

  /** Marks the start of a session's deletion: inputs that entered before are stale. */
  markDeleted(sessionId: string): void {
    this.epochs.set(sessionId, (this.epochs.get(sessionId) ?? 0) + 1);
  }

  /** Stops accepting: new and gate-held inputs are dropped (S9). */
  close(): void {
    this.closed = true;
    this.holds.wakeAll();
  }

  /** Inputs still on their way through the gate. */
  pending(): Promise<Settlement>[] {
    return [...this.inFlight];
  }

  /**
   * S1: resolves once the input is settled; rejects (never throws synchronously) only for an
   * input that is invalid in itself. A failing store on the way drops the input as `failed`.
   */
  handle(message: IncomingMessage): Promise<Settlement> {
    try {
      validate(message);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const done = this.pass({ ...message }).catch((error: unknown): Settlement => {
      this.logger.error(`Input for session ${message.sessionId} failed: ${String(error)}`);
      this.deps.events.emit('outbound:stream', { sessionId: message.sessionId, done: true });
      return { settled: 'dropped', reason: 'failed' };
    });
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
    return done;
  }

  private async pass(message: IncomingMessage): Promise<Settlement> {
    const { sessionId } = message;
    const { holds } = this;
    const epoch = this.epochs.get(sessionId) ?? 0;
    const generation = await this.deps.sessions.generationOf(sessionId);
    await holds.whenFree(sessionId, () => this.closed);
    if (this.closed) return this.dropArchived(message, 'shutdown', epoch, generation);
    await this.deps.sessions.ensure(
      sessionId,
      message.sessionKind ? { kind: message.sessionKind } : {},
    );
    const settlement = new Deferred<Settlement>();
    const ctx: InputBeforeContext = { message };
    let reached: boolean;
    try {
      reached = await this.deps.hooks.run('agent:input:before', ctx, async () => {
        const entered = await this.enter(ctx.message, settlement, epoch, generation);
        if (entered) await settlement.promise;
      });
    } catch (error) {
      if (settlement.settled) return settlement.promise;
      this.logger.error(`agent:input:before failed for session ${sessionId}: ${String(error)}`);
      return this.dropArchived(ctx.message, 'failed', epoch, generation);
    }
    if (!reached) {
      this.deps.events.emit('outbound:stream', { sessionId, done: true });
      return { settled: 'discarded' };
    }
    return settlement.promise;
  }

  /**
   * Waits out holds, then checks the generation and hands the input to its lane. The last hold
   * check and the hand-off happen in one synchronous step. Returns false when dropped.
   */
  private async enter(
    message: IncomingMessage,
    settlement: Deferred<Settlement>,
    epoch: number,
    generation: number,
  ): Promise<boolean> {
    const { sessionId } = message;
    const { holds } = this;
    for (;;) {
      await holds.whenFree(sessionId, () => this.closed);
      const now = this.closed ? generation : await this.deps.sessions.generationOf(sessionId);
      // Shutdown or a new hold may have begun while the generation was read.
      if (this.closed) {
        settlement.resolve(await this.dropArchived(message, 'shutdown', epoch, generation));
        return false;
      }
      if (holds.isHeld(sessionId)) continue;
      if (now !== generation || (this.epochs.get(sessionId) ?? 0) !== epoch) {
        settlement.resolve(await this.drop(message, 'stale-generation', false));
        return false;
      }
      // Plain data crosses the dispatcher seam: the message in, its settlement out.
      void this.dispatcher.submit(message).then((result) => settlement.resolve(result));
      return true;
    }
  }

  /**
   * Drops an input that is archived without turn id (shutdown, I14; a failing preprocessor), unless
   * its session was deleted since it arrived: an input of a deleted generation is never archived
   * (S7).
   */
  private async dropArchived(
    message: IncomingMessage,
    reason: DropReason,
    epoch: number,
    generation: number,
  ): Promise<Settlement> {
    const { sessionId } = message;
    let stale = (this.epochs.get(sessionId) ?? 0) !== epoch;
    if (!stale) {
      const now = await this.deps.sessions.generationOf(sessionId).catch(() => generation);
      stale = now !== generation || (this.epochs.get(sessionId) ?? 0) !== epoch;
    }
    return stale ? this.drop(message, 'stale-generation', false) : this.drop(message, reason, true);
  }

  private async drop(
    message: IncomingMessage,
    reason: DropReason,
    archive: boolean,
  ): Promise<Settlement> {
    if (archive) {
      await this.deps.archive
        .append([archivedInput(message)])
        .catch((error: unknown) =>
          this.logger.error(`Could not archive a dropped input: ${String(error)}`),
        );
    }
    this.deps.events.emit('outbound:stream', { sessionId: message.sessionId, done: true });
    return { settled: 'dropped', reason };
  }
}

function validate(message: IncomingMessage): void {
  if (!message || typeof message !== 'object')
    throw new InvalidInputError('message', 'must be an object');
  if (typeof message.sessionId !== 'string' || !message.sessionId.trim()) {
    throw new InvalidInputError('sessionId', 'must be a non-empty string');
  }
  if (typeof message.content !== 'string')
    throw new InvalidInputError('content', 'must be a string');
  if (message.source !== undefined && (typeof message.source !== 'string' || !message.source)) {
    throw new InvalidInputError('source', 'must be a non-empty string when given');
  }
}
