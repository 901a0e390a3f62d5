import type { IncomingMessage } from './messages';
import type { AbortOptions, DropReason, Settlement } from './turn';

/**
 * The seam between the agent's facade and the session lanes: where a session's work runs. The
 * default runs every lane in this process; a distributed dispatcher runs a session's lane on
 * the instance that holds its lease and relays inputs and control to it. Everything that
 * crosses this seam is plain data: messages in, settlements out.
 */
export interface WorkDispatcher {
  /**
   * Hands a preprocessed input to its session's lane. Accepted synchronously, in call order
   * (the caller has just checked holds and the generation); resolves with its settlement (S1).
   */
  submit(message: IncomingMessage): Promise<Settlement>;
  /** S3: stops the session's running turn when `turnId` matches; whether it stopped one. */
  abort(sessionId: string, options: AbortOptions): boolean;
  /** Stops the running turn and drops the waiting inputs; resolves once the session settled. */
  stop(sessionId: string, reason: DropReason, why?: string): Promise<void>;
  /** Opens turns that waited for a hold to be released. */
  resume(): void;
  /** The session's waiting inputs in arrival order (S8). */
  waiting(sessionId: string): IncomingMessage[];
  /** The session's running turn id, if any. */
  runningTurn(sessionId: string): string | undefined;
  /** Sessions with a running turn or waiting inputs. */
  activeSessions(): string[];
}

/** Injection token of the work dispatcher. */
export const WorkDispatcher = Symbol.for('agent:WorkDispatcher');
