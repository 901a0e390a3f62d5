import type {
  ApprovalEvent,
  ApprovalRecord,
  PendingApproval,
  ToolCallContext,
} from '../../contracts';
import { toolError, type ToolResult } from '../tools';
import type { EnginePorts } from './ports';
import type { Turn } from './turn';

/** What the approval gate of a tool call uses. */
export type ApprovalPorts = Pick<EnginePorts, 'tools' | 'approvals' | 'events' | 'options'>;

/**
 * The gate's answer: nothing (no approval needed, or the turn was stopped while waiting: the
 * call then gets the usual stopped result), the decision to persist, and for a call that was
 * denied or not decided in time the result the model gets instead of running it.
 */
export interface ApprovalGate {
  record?: ApprovalRecord;
  denied?: ToolResult;
}

/**
 * Issue 20: a call of a tool whose `needsApproval` says so (for these arguments, after
 * `agent:tool:before`) waits for a person: `agent:approval` (`requested`), listed in the
 * `ApprovalRegistry` until `AgentService.approve` decides it, `approvalTimeoutMs` passes or the
 * turn is stopped, then `agent:approval` (`decided`). The turn's deadline is paused meanwhile.
 * The answer at once (no promise) for a tool without an approval rule, nearly every call.
 */
export function approvalGate(
  deps: ApprovalPorts,
  turn: Turn,
  call: { name: string; args: unknown },
  context: ToolCallContext,
): ApprovalGate | Promise<ApprovalGate> {
  // A stopped turn asks nobody: the call gets the usual stopped result.
  if (turn.aborted || !deps.tools.mayNeedApproval(call.name)) return NO_GATE;
  return askApproval(deps, turn, call, context);
}

/** No approval asked: nothing to record, nothing denied. */
const NO_GATE: ApprovalGate = Object.freeze({});

async function askApproval(
  deps: ApprovalPorts,
  turn: Turn,
  call: { name: string; args: unknown },
  context: ToolCallContext,
): Promise<ApprovalGate> {
  if (!(await deps.tools.needsApproval(call.name, call.args, context))) return NO_GATE;
  const { sessionId, turnId, callId } = context;
  const { name, args } = call;
  const requestedAt = new Date().toISOString();
  const pending: PendingApproval = { sessionId, turnId, callId, name, args, requestedAt };
  const base: Omit<ApprovalEvent, 'phase'> = { sessionId, turnId, callId, name, args };
  deps.events.emit('agent:approval', { ...base, phase: 'requested', requestedAt });
  const resume = turn.deadline?.pause();
  const timeoutMs = deps.options.approvalTimeoutMs;
  const wait = await deps.approvals.wait(pending, timeoutMs, turn.signal).finally(resume);
  if ('stopped' in wait) {
    deps.events.emit('agent:approval', { ...base, phase: 'decided', stopped: true });
    return {};
  }
  const record = wait.record;
  deps.events.emit('agent:approval', { ...base, phase: 'decided', decision: record });
  if (record.approved) return { record };
  return { record, denied: toolError(denial(name, record, timeoutMs)) };
}

/** What the model is told about a call that did not run. */
function denial(name: string, record: ApprovalRecord, timeoutMs: number): string {
  if (record.timedOut) {
    const seconds = Math.round(timeoutMs / 100) / 10;
    return `The call to "${name}" was not approved within ${seconds} s`;
  }
  const by = record.by ? ` by ${record.by.userId}` : '';
  const reason = record.reason ? `: ${record.reason}` : '';
  return `The call to "${name}" was denied${by}${reason}`;
}
