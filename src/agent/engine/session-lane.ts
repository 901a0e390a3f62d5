/**
 * The per-session lane: a pure state machine with no I/O (contract S2, I1-I3). It knows the
 * running turn and the waiting inputs; the scheduler feeds it events and carries out what it
 * returns. One lane per active session; a lane that is idle and empty can be forgotten.
 */

/** An input as the lane sees it. */
export interface LaneInput<T = unknown> {
  /** Arrival sequence number, unique within the process. */
  seq: number;
  /** Human inputs have no `source`. */
  source?: string;
  /** What the caller attaches (the message, its settlement, ...). */
  payload: T;
}

/** The running turn as the lane sees it. */
export interface LaneTurn {
  turnId: string;
  /** Whether a human input opened it (only those accept insertions, S2). */
  humanOpened: boolean;
  /** False once the turn is past its last model call (I2). */
  acceptsInsertions: boolean;
}

/** Where an arriving input went. */
export type Arrival = 'pending' | 'queued';

interface Waiting<T> {
  input: LaneInput<T>;
  /** Pending insertion into the running turn (else queued). */
  pending: boolean;
}

/** The lane state machine. */
export class SessionLane<T = unknown> {
  private turn: LaneTurn | undefined;
  private readonly waiting: Waiting<T>[] = [];

  /** The running turn, if any. */
  get running(): Readonly<LaneTurn> | undefined {
    return this.turn;
  }

  /** Whether nothing runs and nothing waits. */
  get idle(): boolean {
    return !this.turn && this.waiting.length === 0;
  }

  /** How many inputs wait (pending insertion and queued). */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /**
   * A key that changes whenever the waiting list does, in constant time: every change of the
   * list adds at its end, removes, or empties it, so length, first and last arrival tell.
   */
  waitingKey(): string {
    const n = this.waiting.length;
    return n ? `${n}:${this.waiting[0].input.seq}:${this.waiting[n - 1].input.seq}` : '';
  }

  /** Waiting inputs (pending insertion and queued) in arrival order (S8). */
  waitingInputs(): LaneInput<T>[] {
    return this.waiting.map((w) => w.input);
  }

  /** `pick` of each waiting input's payload, in arrival order, in one pass (S8). */
  waitingPayloads<R>(pick: (payload: T) => R): R[] {
    const out = new Array<R>(this.waiting.length);
    for (let i = 0; i < out.length; i++) out[i] = pick(this.waiting[i].input.payload);
    return out;
  }

  /**
   * An input arrives: a human input joins a running human-opened turn that still accepts
   * insertions (pending insertion); everything else queues (S2). Call `openNext` afterwards.
   */
  arrive(input: LaneInput<T>): Arrival {
    const pending =
      input.source === undefined && !!this.turn?.humanOpened && this.turn.acceptsInsertions;
    this.waiting.push({ input, pending });
    return pending ? 'pending' : 'queued';
  }

  /**
   * When no turn runs, opens the next one from the head of the waiting list: a sourced head
   * alone, a human head with the human inputs directly behind it (I3). Returns its inputs, or
   * `undefined` when a turn runs or nothing waits.
   */
  openNext(turnId: string): LaneInput<T>[] | undefined {
    if (this.turn || !this.waiting.length) return undefined;
    const head = this.waiting[0].input;
    let count = 1;
    if (head.source === undefined) {
      while (count < this.waiting.length && this.waiting[count].input.source === undefined) {
        count++;
      }
    }
    const inputs = this.waiting.splice(0, count).map((w) => w.input);
    this.turn = { turnId, humanOpened: head.source === undefined, acceptsInsertions: true };
    return inputs;
  }

  /**
   * Before a (non-retry) model call of the running turn: takes the pending insertions, in
   * arrival order, out of the waiting list (I2). Empty when the turn does not accept them.
   */
  takePending(turnId: string): LaneInput<T>[] {
    if (this.turn?.turnId !== turnId || !this.turn.acceptsInsertions) return [];
    const taken: LaneInput<T>[] = [];
    for (let i = 0; i < this.waiting.length;) {
      if (this.waiting[i].pending) taken.push(this.waiting.splice(i, 1)[0].input);
      else i++;
    }
    return taken;
  }

  /** The running turn is past its last model call: later human inputs queue (I2). */
  closeInsertions(turnId: string): void {
    if (this.turn?.turnId === turnId) this.turn.acceptsInsertions = false;
  }

  /**
   * The running turn has settled: its leftover pending insertions become queued inputs that open
   * the next turn. Returns false when `turnId` is not the running turn.
   */
  settle(turnId: string): boolean {
    if (this.turn?.turnId !== turnId) return false;
    this.turn = undefined;
    for (const w of this.waiting) w.pending = false;
    return true;
  }

  /** Drops every waiting input (abort with `queued`, clearing, deletion, shutdown). */
  dropWaiting(): LaneInput<T>[] {
    return this.waiting.splice(0).map((w) => w.input);
  }
}
