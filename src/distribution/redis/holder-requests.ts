import type {
  AbortOptions,
  ApprovalDecision,
  DropReason,
  IncomingMessage,
  SessionLanes,
  Settlement,
} from '../../contracts';
import type { InstanceMailbox } from './instance-mailbox';

/** The mailbox's message types between instances. */
export const [POKE, SETTLED, ABORT, STOP, STATE] = ['poke', 'settled', 'abort', 'stop', 'state'];
/** Approval requests to the instance where a tool call waits (issue 20). */
export const [APPROVE, APPROVALS] = ['approve', 'approvals'];

/** The body of an `APPROVE` request. */
export interface ApproveBody {
  sessionId: string;
  callId: string;
  decision: ApprovalDecision;
}

/** A session's state as its holder answers it. */
export interface HolderState {
  runningTurn?: string;
  waiting: IncomingMessage[];
}

/** What an instance does with each message its mailbox receives. */
export interface HolderHandlers {
  /** New inputs are on the session's pending list. */
  poke(sessionId: string): unknown;
  /** An input whose caller waits here settled elsewhere. */
  settled(id: string, settlement: Settlement): void;
  /** S3 for a session this instance may hold; whether a turn was stopped. */
  abort(sessionId: string, options: AbortOptions): boolean;
  /** Stops the session here (clearing, deletion); resolves once it settled. */
  stop(sessionId: string, reason: DropReason, why?: string): Promise<unknown>;
}

/** The state of a session from the lanes of the instance that holds it. */
export function holderState(
  lanes: Pick<SessionLanes, 'runningTurn' | 'waiting'>,
  sessionId: string,
): HolderState {
  const running = lanes.runningTurn(sessionId);
  const state: HolderState = { waiting: lanes.waiting(sessionId) };
  if (running !== undefined) state.runningTurn = running;
  return state;
}

/** Answers the mailbox's messages with `handlers` (the state from `lanes`). */
export function answerMailbox(
  mailbox: InstanceMailbox,
  lanes: SessionLanes,
  handlers: HolderHandlers,
): void {
  const on = <T>(type: string, handler: (body: T) => unknown) =>
    mailbox.on(type, (envelope) => handler(envelope.body as T));
  on<{ sessionId: string }>(POKE, ({ sessionId }) => handlers.poke(sessionId));
  on<{ id: string; settlement: Settlement }>(SETTLED, ({ id, settlement }) =>
    handlers.settled(id, settlement),
  );
  on<{ sessionId: string; options: AbortOptions }>(ABORT, ({ sessionId, options }) =>
    handlers.abort(sessionId, options),
  );
  on<{ sessionId: string; reason: DropReason; why?: string }>(STOP, async (body) => {
    await handlers.stop(body.sessionId, body.reason, body.why);
    return null;
  });
  on<{ sessionId: string }>(STATE, ({ sessionId }) => holderState(lanes, sessionId));
  on<ApproveBody>(APPROVE, ({ sessionId, callId, decision }) =>
    lanes.approve(sessionId, callId, decision),
  );
  on<{ sessionId: string }>(APPROVALS, ({ sessionId }) => lanes.approvals(sessionId));
}
