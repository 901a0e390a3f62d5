import type { HistoryStore, InputInbox, MessageArchive, SessionStore } from '../../contracts';
import type { HookRegistry } from '../../hooks';
import type { ModelRegistry } from '../../llm';
import type { PromptAssembler } from '../../prompt';
import type { TokenEstimator, UsageTracker } from '../../usage';
import type { AgentEventBus } from '../agent-event.bus';
import type { ResolvedAgentOptions } from '../agent.options';
import type { AgentInstrumentation } from '../instrumentation';
import type { ToolRegistry } from '../tools';
import type { ApprovalRegistry } from '../tools/approval.registry';
import type { PendingInput } from './turn';

/**
 * The vocabulary of what the engine may touch. Nothing receives all of it: each phase declares
 * the few members it uses as a `Pick` of this, so its signature shows its reach.
 */
export interface EnginePorts {
  hooks: HookRegistry;
  prompts: PromptAssembler;
  tools: ToolRegistry;
  /** Tool calls waiting for a person's approval (issue 20). */
  approvals: ApprovalRegistry;
  models: ModelRegistry;
  sessions: SessionStore;
  history: HistoryStore;
  archive: MessageArchive;
  /** The durable record of accepted inputs until they settle. */
  inbox: InputInbox;
  /** Only `emit` (and whether anybody listens): the engine notifies, it never listens. */
  events: Pick<AgentEventBus, 'emit' | 'hasListeners'>;
  usage: UsageTracker;
  estimator: TokenEstimator;
  options: ResolvedAgentOptions;
  instrumentation: AgentInstrumentation;
}

/** The turn's handle on its lane: join pending insertions, close the join window. */
export interface LaneHandle {
  /** Takes the pending insertions (I2); empty when none or the window is closed. */
  takePending(): PendingInput[];
  /** The turn is past its last model call. */
  closeInsertions(): void;
}
