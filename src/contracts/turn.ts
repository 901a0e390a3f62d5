import type { IncomingMessage, Message } from './messages';

/** How a turn ended (H4). */
export type TurnOutcome = 'replied' | 'silent' | 'aborted' | 'error';

/** How an input entered its turn (P3). */
export type TurnEntry = 'opened' | 'joined';

/** One input of a turn (H1): `archived` is set once it is persisted. */
export interface TurnInput {
  readonly message: IncomingMessage;
  archived?: Message;
}

/** The record of a finished turn, stored under `WellKnownMetadataKeys.TurnRecord` (P4, I7). */
export interface TurnRecord {
  outcome: TurnOutcome;
  source?: string;
  error?: string;
  /** Who stopped an aborted turn, when a person did. */
  by?: { platform: string; userId: string };
}

/**
 * How a turn ended (H4): the one shape carried from the turn runner to the settlement of its
 * inputs, the `agent:turn:end` event and the REST answer (a projection of it).
 */
export interface TurnEnd {
  turnId: string;
  outcome: TurnOutcome;
  /** The reply sent, on `replied`. */
  reply?: string;
  /** The one-sentence notice sent to the session, on `error` (H4). */
  error?: string;
}

/**
 * How an input was settled (S1): it was part of a turn that ended, it was dropped (abort with
 * `queued`, clearing, deletion, shutdown, stale generation), or a preprocessor discarded it.
 */
export type Settlement =
  | ({ settled: 'turn' } & TurnEnd)
  | { settled: 'dropped'; reason: DropReason }
  | { settled: 'discarded' };

/** Why an input was dropped before entering a turn. */
export type DropReason =
  | 'aborted'
  | 'cleared'
  | 'deleted'
  | 'shutdown'
  | 'stale-generation'
  | 'blocked'
  | 'failed'
  /** The session's waiting list is at its maximum (`maxWaiting`). */
  | 'queue-full'
  /** A store could not take the input (see `StoreUnavailableError`). */
  | 'store-unavailable';

/** Options of `AgentService.abort` (S3). */
export interface AbortOptions {
  /** Stop only if this is the running turn's id (I5). */
  turnId?: string;
  /** Also drop the waiting inputs; they are archived without turn id after the turn settles. */
  queued?: boolean;
  /** Only written to the turn-end log line. */
  reason?: string;
  /** The person who stopped the turn; named in the stop marker. */
  by?: { platform: string; userId: string };
}
