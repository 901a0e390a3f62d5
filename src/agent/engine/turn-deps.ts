import type { HistoryStore, MessageArchive, SessionStore } from '../../contracts';
import type { HookRegistry } from '../../hooks';
import type { ModelRegistry } from '../../llm';
import type { PromptAssembler } from '../../prompt';
import type { TokenEstimator, UsageTracker } from '../../usage';
import type { AgentEventBus } from '../agent-event.bus';
import type { ResolvedAgentOptions } from '../agent.options';
import type { ToolRegistry } from '../tools';
import type { PendingInput } from './turn';

/** What the turn runner and its phases use. Built once by the agent module. */
export interface TurnDeps {
  hooks: HookRegistry;
  prompts: PromptAssembler;
  tools: ToolRegistry;
  models: ModelRegistry;
  sessions: SessionStore;
  history: HistoryStore;
  archive: MessageArchive;
  events: AgentEventBus;
  usage: UsageTracker;
  estimator: TokenEstimator;
  options: ResolvedAgentOptions;
}

/** The turn's handle on its lane: join pending insertions, close the join window. */
export interface LaneHandle {
  /** Takes the pending insertions (I2); empty when none or the window is closed. */
  takePending(): PendingInput[];
  /** The turn is past its last model call. */
  closeInsertions(): void;
}
