import type {
  AbortOptions,
  IncomingMessage,
  Settlement,
  TurnInput,
  TurnOutcome,
} from '../../contracts';
import { Deferred } from './deferred';

/** An input on its way: the message after preprocessing and its settlement. */
export interface PendingInput {
  message: IncomingMessage;
  settlement: Deferred<Settlement>;
}

/** How a turn ended, as the scheduler needs it. */
export interface TurnResult {
  /** `blocked`: an `agent:turn:before` middleware did not call `next`. */
  outcome: TurnOutcome | 'blocked';
  reply?: string;
  error?: string;
}

/**
 * One turn: its id, its live inputs, the controller that stops it and the promise that settles
 * when it has ended (including `agent:turn:after`).
 */
export class Turn {
  readonly controller = new AbortController();
  readonly settled = new Deferred<TurnResult>();
  /** Set once the runner has returned (the turn has ended, bookkeeping done). */
  ended = false;
  /** Who stopped it and why (the first stop wins). */
  stop?: Pick<AbortOptions, 'by' | 'reason'>;
  /** Pending inputs of the turn, index-aligned with `inputs`. */
  readonly members: PendingInput[] = [];

  constructor(
    readonly id: string,
    readonly sessionId: string,
    /** The shared source of its inputs; absent for human turns. */
    readonly source: string | undefined,
    /** Live: joined inputs are appended (H1). */
    readonly inputs: TurnInput[] = [],
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Adds an input (opening or joined). */
  add(input: PendingInput): TurnInput {
    const turnInput: TurnInput = { message: input.message };
    this.members.push(input);
    this.inputs.push(turnInput);
    return turnInput;
  }

  /** Stops the turn; returns false when it was already stopping. */
  abort(stop: Pick<AbortOptions, 'by' | 'reason'>): boolean {
    if (this.controller.signal.aborted) return false;
    this.stop = stop;
    this.controller.abort();
    return true;
  }
}
