import { isoNow, newId } from '../../contracts';
import { setMaxListeners } from 'node:events';
import { Logger } from '@nestjs/common';
import {
  escapeForLog,
  InvalidInputError,
  normaliseDeep,
  StoreUnavailableError,
  type DropReason,
  type InboxAcceptOptions,
  type IncomingMessage,
  type InputBeforeContext,
  type Settlement,
  type WorkDispatcher,
} from '../../contracts';
import type { InputInfo } from '../instrumentation';
import { describeError } from './describe-error';
import type { EnginePorts } from './ports';
import { pendingInput, settleInput } from './settlement';
import { archivedInput, isArchivable } from './turn-state';

/** An input the caller sent without an id: the inbox may forget it once it settles. */
const GENERATED_ID: Readonly<InboxAcceptOptions> = Object.freeze({ generatedId: true });

/** What the gate uses. */
export type GatePorts = Pick<
  EnginePorts,
  'hooks' | 'sessions' | 'archive' | 'inbox' | 'events' | 'instrumentation'
>;

/** Where an input stands when it is about to enter its lane. */
interface Entry {
  message: IncomingMessage;
  /** Local deletion epoch at arrival (S7). */
  epoch: number;
  /** Session generation at arrival (S7). */
  generation: number;
}

/**
 * The way of an input from `handleMessage` to its lane (S1, S5, S7, I11): validation, hold,
 * `agent:input:before`, then, inside its default action, hold again, the generation check and
 * the hand-off to the dispatcher, which refuses it while a hold covers the session. Resolves
 * once the input is settled.
 */
export class InputGate {
  private readonly logger = new Logger('InputGate');
  /** Local deletion epochs: moved synchronously when a deletion starts (S7). */
  private readonly epochs = new Map<string, number>();
  /** Aborted at shutdown: wakes inputs waiting for a hold (S9). */
  private readonly closing = new AbortController();
  /** Inputs on their way in this process, by id: a repeated delivery joins the first. */
  private readonly inFlight = new Map<string, Promise<Settlement>>();

  constructor(
    private readonly ports: GatePorts,
    private readonly dispatcher: WorkDispatcher,
  ) {
    // Every input waiting out a hold listens for shutdown on this one signal (and stops
    // listening when it wakes): many at once is normal, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  /** Marks the start of a session's deletion: inputs that entered before are stale. */
  markDeleted(sessionId: string): void {
    this.epochs.set(sessionId, this.epochOf(sessionId) + 1);
  }

  /** Stops accepting: new and gate-held inputs are dropped (S9). */
  close(): void {
    this.closing.abort();
  }

  /** Inputs still on their way (through the gate or in their lanes). */
  pending(): Promise<Settlement>[] {
    return [...this.inFlight.values()];
  }

  /**
   * S1: resolves once the input is settled; rejects (never throws synchronously) only for an
   * input that is invalid in itself. A failing store on the way drops the input as `failed`.
   */
  handle(message: IncomingMessage, onAccepted?: () => void): Promise<Settlement> {
    try {
      validate(message);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    // One text policy (U+0000, lone surrogates) before the model and the store see the input,
    // so both see the same text; the session id is the caller's key and stays as given.
    const id = message.id ?? newId();
    // A clean message (nearly all) is copied as it is; otherwise all but the session id.
    const clean = normaliseDeep(message) === message;
    const accepted = clean ? { ...message, id } : { ...normalisedBesidesSession(message), id };
    // The deletion epoch is taken now, before anything is awaited (S7).
    const epoch = this.epochOf(accepted.sessionId);
    const generatedId = message.id === undefined;
    return this.track(accepted, () => this.accept(accepted, epoch, generatedId, onAccepted));
  }

  /**
   * Takes up an input the inbox kept across a restart (accepted, never settled, in no turn):
   * it goes the whole way again, without being recorded twice.
   */
  resume(message: IncomingMessage & { id: string }): Promise<Settlement> {
    const epoch = this.epochOf(message.sessionId);
    return this.track(message, () => this.pass({ ...message }, epoch));
  }

  /** Records the input in the inbox (it is durable from now on) unless it is a repeat. */
  private async accept(
    message: IncomingMessage & { id: string },
    epoch: number,
    generatedId: boolean,
    onAccepted?: () => void,
  ): Promise<Settlement> {
    const options = generatedId ? GENERATED_ID : undefined;
    const { entry, duplicate } = await this.ports.inbox.accept(message, options);
    onAccepted?.();
    if (!duplicate) return this.pass(message, epoch);
    // A repeated delivery of an input this process does not carry: its first settlement; not
    // settled yet, the dispatcher follows the first delivery where it runs (distributed mode),
    // so the input passes `agent:input:before` and runs once (S5).
    if (entry.settlement) return entry.settlement;
    const repeated = { ...entry.message, id: message.id };
    return this.dispatcher.repeat?.(repeated) ?? this.pass(entry.message, epoch);
  }

  private track(
    message: IncomingMessage & { id: string },
    run: () => Promise<Settlement>,
  ): Promise<Settlement> {
    const known = this.inFlight.get(message.id);
    if (known) return known;
    // Optional fields set after the literal, not spread into it (the slow way to build it).
    const info: InputInfo = {
      sessionId: message.sessionId,
      id: message.id,
      content: message.content,
    };
    if (message.source !== undefined) info.source = message.source;
    if (message.messageId !== undefined) info.messageId = message.messageId;
    if (message.traceparent !== undefined) info.traceparent = message.traceparent;
    const done = this.ports.instrumentation.input(info, () => {
      // The input's trace goes with it (inbox, lanes, other instances): its turn joins it.
      if (info.traceparent !== undefined) message.traceparent = info.traceparent;
      return run().catch((error: unknown) => {
        this.logger.error(
          `Input for session ${escapeForLog(message.sessionId)} failed: ${describeError(error)}`,
        );
        return this.drop(message, dropReasonOf(error), false);
      });
    });
    this.inFlight.set(message.id, done);
    void done.finally(() => this.inFlight.delete(message.id));
    return done;
  }

  private get closed(): boolean {
    return this.closing.signal.aborted;
  }

  private epochOf(sessionId: string): number {
    return this.epochs.get(sessionId) ?? 0;
  }

  private async pass(message: IncomingMessage, epoch: number): Promise<Settlement> {
    const { sessionId } = message;
    const generation = await this.ports.sessions.generationOf(sessionId);
    await this.dispatcher.whenFree(sessionId, this.closing.signal);
    if (this.closed) return this.dropArchived({ message, epoch, generation }, 'shutdown');
    const kind = message.sessionKind;
    // The input is accepted: the session's activity moves to now in the same write (the list).
    const settings = await this.ports.sessions.ensure(sessionId, kind ? { kind } : {}, {
      activeAt: isoNow(),
    });
    // Settings made before the first message (`updateSession`) have no kind yet: the first
    // input that names one sets it.
    if (kind && settings && settings.kind === undefined) {
      await this.ports.sessions.update(sessionId, { kind });
    }
    const ctx: InputBeforeContext = { message };
    let settled: Promise<Settlement> | undefined;
    try {
      const reached = await this.ports.hooks.run('agent:input:before', ctx, async () => {
        settled = this.enter({ message: ctx.message, epoch, generation });
        await settled;
      });
      if (!reached) return this.discard(ctx.message);
    } catch (error) {
      if (settled) return settled;
      this.logger.error(
        `agent:input:before failed for session ${escapeForLog(sessionId)}: ${describeError(error)}`,
      );
      if (error instanceof StoreUnavailableError) {
        return this.drop(ctx.message, 'store-unavailable', false);
      }
      return this.dropArchived({ message: ctx.message, epoch, generation }, 'failed');
    }
    return settled!;
  }

  /**
   * Waits out holds, then checks the generation and hands the input to the dispatcher, which
   * refuses it if a hold began meanwhile (then it waits again). Resolves with its settlement.
   */
  private async enter(entry: Entry): Promise<Settlement> {
    const { message, generation } = entry;
    const { sessionId } = message;
    for (;;) {
      await this.dispatcher.whenFree(sessionId, this.closing.signal);
      const now = this.closed ? generation : await this.ports.sessions.generationOf(sessionId);
      // Shutdown may have begun while the generation was read.
      if (this.closed) return this.dropArchived(entry, 'shutdown');
      if (now !== generation || this.epochOf(sessionId) !== entry.epoch) {
        return this.drop(message, 'stale-generation', false);
      }
      // Plain data crosses the dispatcher seam: the message in, its settlement out.
      const admission = await this.dispatcher.submit(message);
      if (admission.accepted) return admission.settlement;
    }
  }

  /**
   * Drops an input that is archived without turn id (shutdown, I14; a failing preprocessor), unless
   * its session was deleted since it arrived: an input of a deleted generation is never archived
   * (S7).
   */
  private async dropArchived(entry: Entry, reason: DropReason): Promise<Settlement> {
    const { message, epoch, generation } = entry;
    const { sessionId } = message;
    let stale = this.epochOf(sessionId) !== epoch;
    if (!stale) {
      const now = await this.ports.sessions.generationOf(sessionId).catch(() => generation);
      stale = now !== generation || this.epochOf(sessionId) !== epoch;
    }
    return stale ? this.drop(message, 'stale-generation', false) : this.drop(message, reason, true);
  }

  private async drop(
    message: IncomingMessage,
    reason: DropReason,
    archive: boolean,
  ): Promise<Settlement> {
    if (archive && isArchivable(message)) {
      await this.ports.archive
        .append([archivedInput(message)])
        .catch((error: unknown) =>
          this.logger.error(`Could not archive a dropped input: ${String(error)}`),
        );
    }
    return settleInput(this.ports, pendingInput(message), { settled: 'dropped', reason });
  }

  /** S1c: a preprocessor did not call `next`: no turn, no archive, a stream-end marker. */
  private discard(message: IncomingMessage): Promise<Settlement> {
    return settleInput(this.ports, pendingInput(message), { settled: 'discarded' });
  }
}

/** `normaliseDeep` of every field of the message but its session id, which stays as given. */
function normalisedBesidesSession(message: IncomingMessage): IncomingMessage {
  const { sessionId, ...rest } = message;
  return { ...normaliseDeep(rest), sessionId };
}

/** A store that could not take the input says so (`store-unavailable`); anything else failed. */
function dropReasonOf(error: unknown): DropReason {
  return error instanceof StoreUnavailableError ? 'store-unavailable' : 'failed';
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
