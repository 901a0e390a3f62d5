import type { Actor } from './messages';

/** A person's answer to a call waiting for approval (`AgentService.approve`). */
export interface ApprovalDecision {
  approved: boolean;
  /** Why; told to the model when the call is denied. */
  reason?: string;
  /** Who decided; named to the model when the call is denied. */
  by?: Actor;
}

/**
 * What became of a call that needed approval, persisted on its tool result's metadata
 * (`WellKnownMetadataKeys.Approval`).
 */
export interface ApprovalRecord {
  approved: boolean;
  /** Who decided; absent when nobody did (timed out) or the host did not say. */
  by?: Actor;
  /** When it was decided (ISO 8601). */
  at: string;
  reason?: string;
  /** Set when nobody decided within `approvalTimeoutMs`: the call was not run. */
  timedOut?: true;
}

/** A tool call waiting for a person's decision (`AgentService.approvals`). */
export interface PendingApproval {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  /** The arguments the tool would run with (after `agent:tool:before`). */
  args: unknown;
  /** When the call started waiting (ISO 8601). */
  requestedAt: string;
}
