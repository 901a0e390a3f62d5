import type {
  AbortOptions,
  Admission,
  ApprovalDecision,
  DispatchView,
  DropReason,
  HoldRelease,
  IncomingMessage,
  PendingApproval,
  SessionLanes,
  SessionLanesFactory,
  WorkDispatcher,
} from '../contracts';
import { HoldTable } from './hold-table';

/**
 * The default `WorkDispatcher`: every session's lane runs in this process. Control takes effect
 * before the call returns (the Promise only carries the answer), which keeps the contract's
 * synchronous rules exact: a hold placed by `hold` covers an input submitted right after it.
 */
export class InProcessDispatcher implements WorkDispatcher {
  private readonly holds = new HoldTable();
  private readonly lanes: SessionLanes;
  readonly view: DispatchView;

  constructor(createLanes: SessionLanesFactory) {
    const lanes = createLanes({ isHeld: (sessionId) => this.holds.isHeld(sessionId) });
    this.lanes = lanes;
    this.view = {
      runningTurn: (sessionId) => lanes.runningTurn(sessionId),
      waiting: (sessionId) => lanes.waiting(sessionId),
      waitingCount: (sessionId) => lanes.waitingCount(sessionId),
      activeSessions: () => lanes.activeSessions(),
      isHeld: (sessionId) => this.holds.isHeld(sessionId),
    };
  }

  submit(message: IncomingMessage): Promise<Admission> {
    if (this.holds.isHeld(message.sessionId)) {
      return Promise.resolve({ accepted: false, reason: 'held' });
    }
    return Promise.resolve({ accepted: true, settlement: this.lanes.enter(message) });
  }

  whenFree(sessionId: string, signal?: AbortSignal): Promise<void> {
    return this.holds.whenFree(sessionId, signal);
  }

  async hold(sessionIds: readonly string[] | undefined, why?: string): Promise<HoldRelease> {
    const release = this.holds.hold(sessionIds);
    try {
      const targets = sessionIds ?? this.lanes.activeSessions();
      await Promise.all(targets.map((id) => this.lanes.stop(id, 'cleared', why)));
    } catch (error) {
      this.release(release);
      throw error;
    }
    return () => Promise.resolve(this.release(release));
  }

  abort(sessionId: string, options: AbortOptions): Promise<boolean> {
    return Promise.resolve(this.lanes.abort(sessionId, options));
  }

  stop(sessionId: string, reason: DropReason, why?: string): Promise<void> {
    return this.lanes.stop(sessionId, reason, why);
  }

  approve(sessionId: string, callId: string, decision: ApprovalDecision): Promise<boolean> {
    return Promise.resolve(this.lanes.approve(sessionId, callId, decision));
  }

  approvals(sessionId: string): Promise<PendingApproval[]> {
    return Promise.resolve(this.lanes.approvals(sessionId));
  }

  async drain(): Promise<void> {
    const sessions = this.lanes.activeSessions();
    await Promise.all(sessions.map((id) => this.lanes.stop(id, 'shutdown', 'shutdown')));
  }

  waiting(sessionId: string): Promise<IncomingMessage[]> {
    return Promise.resolve(this.lanes.waiting(sessionId));
  }

  runningTurn(sessionId: string): Promise<string | undefined> {
    return Promise.resolve(this.lanes.runningTurn(sessionId));
  }

  activeSessions(): Promise<string[]> {
    return Promise.resolve(this.lanes.activeSessions());
  }

  private release(release: () => void): void {
    release();
    this.lanes.resume();
  }
}
