/** Base class of the errors this library throws on purpose. */
export class AgentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** An input that is invalid in itself (S1): `handleMessage` rejects with it. */
export class InvalidInputError extends AgentError {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(`Invalid message: ${field} ${reason}`);
  }
}

/** The session has no settings (S6). */
export class SessionNotFoundError extends AgentError {
  constructor(readonly sessionId: string) {
    super(`Session "${sessionId}" has no settings`);
  }
}

/** A model reference that no provider serves. */
export class ModelNotFoundError extends AgentError {
  constructor(
    readonly ref: { provider?: string; model: string },
    available: string[],
  ) {
    super(
      `No provider serves model "${ref.provider ? `${ref.provider}/` : ''}${ref.model}"` +
        (available.length ? ` (available: ${available.slice(0, 5).join(', ')})` : ''),
    );
  }
}

/** Invalid module options; the message names the option. */
export class AgentOptionsError extends AgentError {}

/** A middleware called `next` more than once. */
export class NextCalledTwiceError extends AgentError {
  constructor(readonly hook: string) {
    super(`A middleware of "${hook}" called next() more than once`);
  }
}

/**
 * A store (sessions, history, archive, inbox) could not do its work: unreachable, timed out,
 * or it refused the write. The message is plain words for people (it names the store, never
 * the driver's text); the driver's error is the `cause`, for the log.
 */
export class StoreUnavailableError extends AgentError {
  constructor(
    /** Which store: `'sessions'`, `'history'`, `'archive'`, `'inbox'`, or an adapter's name. */
    readonly store: string,
    /** What was asked of it, e.g. `'append messages'`. */
    readonly operation: string,
    options?: { cause?: unknown },
  ) {
    super(`The ${store} store is unavailable (${operation})`);
    if (options && 'cause' in options) (this as { cause?: unknown }).cause = options.cause;
  }
}

/**
 * Distributed mode: a write of a session carried a fence older than one the store has seen, so
 * another instance took the session over (this one was paused, partitioned or too slow to renew
 * its lease). The write is refused whole; the turn that made it ends without writing more.
 */
export class FencedWriteError extends AgentError {
  constructor(
    readonly sessionId: string,
    /** The fence the write carried. */
    readonly fence: number,
    /** The newest fence the store has seen for the session. */
    readonly current: number,
  ) {
    super(
      `A write of session ${JSON.stringify(sessionId)} carried fence ${fence}, but the store has seen fence ${current}: another instance holds the session now`,
    );
  }
}

/** Raised inside a turn when it was stopped; ends the turn with outcome `aborted`. */
export class TurnAbortedError extends AgentError {
  constructor() {
    super('The turn was stopped');
  }
}

/**
 * A store bound by the host lacks an optional method that a call needs (e.g.
 * `SessionStore.listByActivity` for the session list). The REST routes answer `501`.
 */
export class StoreMethodMissingError extends AgentError {
  constructor(
    /** Which store: `'sessions'`, ... */
    readonly store: string,
    /** The missing method, e.g. `'listByActivity'`. */
    readonly method: string,
  ) {
    super(`The ${store} store does not implement ${method}(), which this call needs`);
  }
}
