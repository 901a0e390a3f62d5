import { Injectable } from '@nestjs/common';
import type { ApprovalDecision, ApprovalRecord, PendingApproval } from '../../contracts';

/** How a wait for approval ended: a decision (or the timeout's), or the turn's stop. */
export type ApprovalWait = { record: ApprovalRecord } | { stopped: true };

interface Waiting {
  pending: PendingApproval;
  settle: (decision: ApprovalDecision) => void;
}

/**
 * The tool calls of this process that wait for a person's approval (issue 20), by session and
 * call id. The engine's tool step waits here; `AgentService.approve` (and the REST routes and
 * socket events behind it) decides. In distributed mode a call waits on the instance that runs
 * its turn: this registry knows only the calls of its own process.
 */
@Injectable()
export class ApprovalRegistry {
  private readonly waiting = new Map<string, Map<string, Waiting>>();

  /**
   * Waits for a decision on `pending`: resolves with it, with a denial marked `timedOut` after
   * `timeoutMs`, or with `stopped` when `signal` aborts. Never rejects; the call is listed
   * until then.
   */
  wait(pending: PendingApproval, timeoutMs: number, signal: AbortSignal): Promise<ApprovalWait> {
    if (signal.aborted) return Promise.resolve({ stopped: true });
    const { sessionId, callId } = pending;
    return new Promise<ApprovalWait>((resolve) => {
      const done = (outcome: ApprovalWait) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.forget(sessionId, callId);
        resolve(outcome);
      };
      const onAbort = () => done({ stopped: true });
      const settle = (decision: ApprovalDecision) => done({ record: recordOf(decision) });
      const timedOut = () => done({ record: { ...recordOf({ approved: false }), timedOut: true } });
      const timer = setTimeout(timedOut, timeoutMs);
      timer.unref?.();
      signal.addEventListener('abort', onAbort, { once: true });
      let calls = this.waiting.get(sessionId);
      if (!calls) this.waiting.set(sessionId, (calls = new Map()));
      calls.set(callId, { pending, settle });
    });
  }

  /** Decides a waiting call; `false` when the session has no such call waiting (here). */
  decide(sessionId: string, callId: string, decision: ApprovalDecision): boolean {
    const waiting = this.waiting.get(sessionId)?.get(callId);
    if (!waiting) return false;
    waiting.settle(decision);
    return true;
  }

  /** The session's calls waiting for approval, oldest first (copies). */
  list(sessionId: string): PendingApproval[] {
    return [...(this.waiting.get(sessionId)?.values() ?? [])].map(({ pending }) => ({
      ...pending,
    }));
  }

  private forget(sessionId: string, callId: string): void {
    const calls = this.waiting.get(sessionId);
    calls?.delete(callId);
    if (calls?.size === 0) this.waiting.delete(sessionId);
  }
}

/** A decision as persisted: only the fields given, with the time it was made. */
function recordOf(decision: ApprovalDecision): ApprovalRecord {
  const record: ApprovalRecord = { approved: decision.approved, at: new Date().toISOString() };
  if (decision.by) record.by = { platform: decision.by.platform, userId: decision.by.userId };
  if (decision.reason !== undefined) record.reason = decision.reason;
  return record;
}
