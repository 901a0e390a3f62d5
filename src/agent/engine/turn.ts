import type { AbortOptions, IncomingMessage, Settlement, TurnInput } from '../../contracts';
import type { Deferred } from './deferred';
import type { TurnDeadline } from './turn-deadline';

/**
 * An input inside the lanes: the message after preprocessing, its settlement (resolved only by
 * `settleInput`) and, once it entered a turn, that turn's id.
 */
export interface PendingInput {
  message: IncomingMessage;
  settlement: Deferred<Settlement>;
  /** Set when the input opens or joins a turn: the turn's stream-end marker is then its own. */
  turnId?: string;
  /**
   * Set when it settles (by `settleInput`): the inbox record of its settlement, true once
   * written, false when the write failed (logged) or the input has no id.
   */
  recorded?: Promise<boolean>;
}

/**
 * One turn: its id, its live inputs, the controller that stops it and the promise that settles
 * when it has ended (including `agent:turn:after`).
 */
export class Turn {
  readonly controller = new AbortController();
  /** The controller's signal, read once (Node's getter checks its receiver on every read). */
  readonly signal: AbortSignal = this.controller.signal;
  /**
   * Whether the turn was stopped: `signal.aborted` as a field, cheap to read once per streamed
   * chunk (the controller is aborted only by `abort`, which sets it first).
   */
  aborted = false;
  /** Resolves once the turn has settled (its inputs too). */
  readonly settled: Promise<void>;
  /** Set once the runner has returned (the turn has ended, bookkeeping done). */
  ended = false;
  /** Who stopped it and why (the first stop wins). */
  stop?: Pick<AbortOptions, 'by' | 'reason'>;
  /** Pending inputs of the turn, index-aligned with `inputs`. */
  readonly members: PendingInput[] = [];
  /** The turn's deadline while it runs (`turnTimeoutMs` > 0); paused during approval waits. */
  deadline?: TurnDeadline;
  /** Set when the turn deadline stopped it: it then ends `error`, not `aborted`. */
  deadlineHit = false;
  /** Whether the turn's stream-end marker went out (I9: once per turn). */
  streamEnded = false;
  /**
   * `seq` of the turn's last stream event (`TurnStreamPosition`): one counter for its turn
   * start, stream chunks, tool calls and turn end, so a resuming client replays them in order.
   */
  seq = 0;
  private markSettled!: () => void;

  constructor(
    readonly id: string,
    readonly sessionId: string,
    /** The shared source of its inputs; absent for human turns. */
    readonly source: string | undefined,
    /** Live: joined inputs are appended (H1). */
    readonly inputs: TurnInput[] = [],
  ) {
    this.settled = new Promise<void>((resolve) => (this.markSettled = resolve));
  }

  /** Adds an input (opening or joined); from now on it belongs to this turn. */
  add(input: PendingInput): TurnInput {
    const turnInput: TurnInput = { message: input.message };
    input.turnId = this.id;
    this.members.push(input);
    this.inputs.push(turnInput);
    return turnInput;
  }

  /** Stops the turn; returns false when it was already stopping. */
  abort(stop: Pick<AbortOptions, 'by' | 'reason'>): boolean {
    if (this.aborted) return false;
    this.aborted = true;
    this.stop = stop;
    this.controller.abort();
    return true;
  }

  /** The turn and its inputs have settled. */
  markDone(): void {
    this.markSettled();
  }
}
