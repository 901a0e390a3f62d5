import type { ApprovalDecision, PendingApproval } from './approvals';
import type { IncomingMessage } from './messages';
import type { AbortOptions, DropReason, Settlement } from './turn';

/**
 * Whether a dispatcher took an input: accepted inputs settle later through `settlement`; an
 * input refused because a hold covers its session right now waits for the hold and comes back.
 */
export type Admission =
  { accepted: true; settlement: Promise<Settlement> } | { accepted: false; reason: 'held' };

/** Releases a hold placed by `WorkDispatcher.hold`; idempotent. */
export type HoldRelease = () => Promise<void>;

/**
 * What this instance knows about the lanes now, without a round trip. The in-process dispatcher
 * answers from its lanes; a distributed one from the turn and queue events of every instance.
 * It backs the contract's synchronous answers (`AgentService.abort`, S3).
 */
export interface DispatchView {
  /** The session's running turn id as this instance knows it. */
  runningTurn(sessionId: string): string | undefined;
  /** The session's waiting inputs in arrival order (S8) as this instance knows them. */
  waiting(sessionId: string): IncomingMessage[];
  /** How many inputs of the session wait, as this instance knows it (without the list). */
  waitingCount(sessionId: string): number;
  /** Sessions with a running turn or waiting inputs, as this instance knows them. */
  activeSessions(): string[];
  /** Whether a hold covers the session now. */
  isHeld(sessionId: string): boolean;
  /** Distributed mode: the instance that runs the session, as this instance knows it. */
  holder?(sessionId: string): string | undefined;
}

/**
 * The seam between the agent's facade and the session lanes: where a session's work runs. The
 * default runs every lane in this process; a distributed dispatcher runs a session's lane on
 * the instance that holds its lease and relays inputs and control to it. Everything that
 * crosses this seam is plain data: messages in, settlements out; control answers are Promises.
 * Holds (clearing, S4) live behind it, so holding, stopping and admitting are one decision.
 */
export interface WorkDispatcher {
  /** This instance's synchronous view. */
  readonly view: DispatchView;
  /**
   * Hands a preprocessed input to its session's lane, unless a hold covers the session at this
   * moment (then it is refused with `held` and the caller waits with `whenFree`). Inputs are
   * accepted in call order; the settlement resolves once the input settled (S1).
   */
  submit(message: IncomingMessage): Promise<Admission>;
  /**
   * A repeated delivery of an input that was accepted before and has not settled, and that this
   * process does not carry (another instance does, or did): resolves with the first delivery's
   * settlement without running the input again. Absent (one process, where the inbox recovery
   * has taken up every unsettled input): the gate passes the input on again.
   */
  repeat?(message: IncomingMessage & { id: string }): Promise<Settlement>;
  /** Resolves once no hold covers the session, or when `signal` aborts. */
  whenFree(sessionId: string, signal?: AbortSignal): Promise<void>;
  /**
   * S4: holds the sessions (`undefined` = all, also those with no state yet), stops their running
   * turns and drops their waiting inputs (not archived, reason `cleared`), and resolves once they
   * settled, with the function that releases the hold and lets waiting inputs in again.
   */
  hold(sessionIds: readonly string[] | undefined, why?: string): Promise<HoldRelease>;
  /** S3: stops the session's running turn when `turnId` matches; whether it stopped one. */
  abort(sessionId: string, options: AbortOptions): Promise<boolean>;
  /** Stops the running turn and drops the waiting inputs; resolves once the session settled. */
  stop(sessionId: string, reason: DropReason, why?: string): Promise<void>;
  /**
   * Decides a tool call of the session waiting for approval, wherever its turn runs; whether
   * such a call was waiting (README, "Human approval before a tool runs").
   */
  approve(sessionId: string, callId: string, decision: ApprovalDecision): Promise<boolean>;
  /** The session's tool calls waiting for approval, oldest first, authoritative. */
  approvals(sessionId: string): Promise<PendingApproval[]>;
  /**
   * S9: stops every lane this instance runs: running turns aborted, waiting inputs dropped and
   * archived without turn id (I14); resolves once all settled.
   */
  drain(): Promise<void>;
  /** The session's waiting inputs in arrival order (S8), authoritative. */
  waiting(sessionId: string): Promise<IncomingMessage[]>;
  /** The session's running turn id, if any, authoritative. */
  runningTurn(sessionId: string): Promise<string | undefined>;
  /** Sessions with a running turn or waiting inputs, authoritative. */
  activeSessions(): Promise<string[]>;
}

/** Injection token of the work dispatcher. */
export const WorkDispatcher = Symbol.for('agent:WorkDispatcher');

/**
 * The per-session lanes a dispatcher drives: the engine's side of the seam (one lane per active
 * session, at most one running turn each, S2). Synchronous where the contract needs an exact
 * answer at the moment of the call; a dispatcher wraps these in its Promises.
 */
export interface SessionLanes {
  /** Puts an input into its session's lane (synchronously); resolves once it settled. */
  enter(message: IncomingMessage): Promise<Settlement>;
  /**
   * `enter`, for a dispatcher that must know when the settlement is durable: `recorded`
   * resolves once the engine's own write of it to the inbox is done (true) or failed (false), so
   * the dispatcher waits for that record instead of writing it again.
   */
  enterRecorded(message: IncomingMessage): EnteredInput;
  /** S3 / I5: stops the running turn when `turnId` matches; whether a matching turn runs. */
  abort(sessionId: string, options: AbortOptions): boolean;
  /** Stops the running turn, drops the waiting inputs; resolves once the session settled. */
  stop(sessionId: string, reason: DropReason, why?: string): Promise<void>;
  /** Decides a tool call of the session waiting for approval here; whether one was waiting. */
  approve(sessionId: string, callId: string, decision: ApprovalDecision): boolean;
  /** The session's tool calls waiting for approval here, oldest first. */
  approvals(sessionId: string): PendingApproval[];
  /** Opens the turns that waited for a hold to be released. */
  resume(): void;
  /** The session's waiting inputs in arrival order (S8). */
  waiting(sessionId: string): IncomingMessage[];
  /** How many inputs of the session wait (pending insertions and queued), in constant time. */
  waitingCount(sessionId: string): number;
  /** The session's running turn id, if any. */
  runningTurn(sessionId: string): string | undefined;
  /** Sessions with a running turn or waiting inputs. */
  activeSessions(): string[];
}

/** An input put into its lane by `SessionLanes.enterRecorded`. */
export interface EnteredInput {
  /** Resolves once it settled. */
  settlement: Promise<Settlement>;
  /** Resolves after `settlement`, once the inbox has it (true) or its write failed (false). */
  recorded: Promise<boolean>;
}

/** What the lanes ask their dispatcher before they open a turn. */
export interface LaneAdmission {
  /** Whether a hold covers the session now: a held session opens no turn (S4). */
  isHeld(sessionId: string): boolean;
}

/** Builds the engine's lanes for a dispatcher, which answers their admission questions. */
export type SessionLanesFactory = (admission: LaneAdmission) => SessionLanes;

/** Injection token of the `SessionLanesFactory` the agent module provides. */
export const SessionLanesFactory = Symbol.for('agent:SessionLanesFactory');
