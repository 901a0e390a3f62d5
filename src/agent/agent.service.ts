import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import {
  escapeForLog,
  WorkDispatcher,
  type AbortOptions,
  type ApprovalDecision,
  type IncomingMessage,
  type ModelRef,
  type PendingApproval,
  type SessionList,
  type SessionListQuery,
  type SessionSettingsPatch,
  type SessionView,
  type Settlement,
  type TokenUsageEvent,
  type WorkDispatcher as WorkDispatcherPort,
} from '../contracts';
import { HookRegistry } from '../hooks';
import { AgentEventBus } from './agent-event.bus';
import { AGENT_MODULE_OPTIONS, AGENT_OPTIONS } from './agent.module-definition';
import type { AgentModuleOptions, ResolvedAgentOptions } from './agent.options';
import { InputGate } from './engine';
import { SessionAdmin } from './session-admin';
import { GUARDED_STORES, type GuardedStores } from './store-guard';
import { ToolRegistry } from './tools';
import { UsageSnapshots } from './usage-snapshots';

/** A preprocessor's `next`: continue, optionally with a replacement message. */
export type PreprocessorNext = (message?: IncomingMessage) => Promise<void>;

/** A preprocessor (S5): runs once per input on `agent:input:before`. */
export type Preprocessor = (
  message: IncomingMessage,
  next: PreprocessorNext,
) => Promise<void> | void;

/**
 * The contract's service (S1-S9): hand it inputs, stop turns, clear history, delete sessions,
 * register preprocessors, assign models, ask for usage snapshots.
 */
@Injectable()
export class AgentService
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly logger = new Logger('AgentService');
  private readonly preprocessors = new Map<string, () => void>();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    @Inject(AGENT_MODULE_OPTIONS) private readonly moduleOptions: AgentModuleOptions,
    @Inject(AGENT_OPTIONS) private readonly options: ResolvedAgentOptions,
    @Inject(WorkDispatcher) private readonly dispatcher: WorkDispatcherPort,
    @Inject(GUARDED_STORES) private readonly stores: GuardedStores,
    private readonly gate: InputGate,
    private readonly hooks: HookRegistry,
    private readonly tools: ToolRegistry,
    private readonly events: AgentEventBus,
    private readonly snapshots: UsageSnapshots,
    private readonly admin: SessionAdmin,
  ) {}

  onModuleInit(): void {
    for (const tool of this.moduleOptions.tools ?? []) {
      this.unsubscribe.push(this.tools.register(tool, 'AgentModule'));
    }
    this.unsubscribe.push(
      this.events.on('session:deleted', ({ sessionId }) => this.onSessionDeleted(sessionId)),
      this.events.on('token:request', ({ sessionId }) =>
        this.requestUsage(sessionId).catch((error: unknown) =>
          this.logger.debug(
            `token:request for ${escapeForLog(sessionId)} failed: ${String(error)}`,
          ),
        ),
      ),
    );
  }

  /**
   * S1: runs the input through preprocessing and into its session's lane; resolves once it is
   * settled (its turn ended, it was dropped, or it was discarded). Rejects only for an input
   * that is invalid in itself.
   */
  handleMessage(message: IncomingMessage): Promise<Settlement> {
    return this.gate.handle(message);
  }

  /**
   * `handleMessage` for callers that answer before the input settles (a `202`): `accepted`
   * resolves once the input is durable in the inbox, or with its settlement when it settled
   * before that (a store that could not take it: `dropped` / `store-unavailable`).
   */
  submit(message: IncomingMessage): {
    accepted: Promise<Settlement | undefined>;
    settlement: Promise<Settlement>;
  } {
    let markAccepted!: () => void;
    const recorded = new Promise<undefined>((resolve) => (markAccepted = () => resolve(undefined)));
    const settlement = this.gate.handle(message, markAccepted);
    return { accepted: Promise.race([recorded, settlement]), settlement };
  }

  /**
   * S3: stops the running turn (when `turnId` matches); returns whether it stopped one, from
   * this instance's view of running turns. The stop itself goes to wherever the turn runs; use
   * `abortAsync` for the answer of the instance that runs it.
   */
  abort(sessionId: string, options: AbortOptions = {}): boolean {
    const running = this.dispatcher.view.runningTurn(sessionId);
    const stopping = running !== undefined && (options.turnId ?? running) === running;
    this.abortAsync(sessionId, options).catch((error: unknown) =>
      this.logger.error(`Abort of session ${escapeForLog(sessionId)} failed: ${String(error)}`),
    );
    return stopping;
  }

  /** S3, awaitable: resolves with the authoritative answer of the instance running the turn. */
  abortAsync(sessionId: string, options: AbortOptions = {}): Promise<boolean> {
    return this.dispatcher.abort(sessionId, options);
  }

  /**
   * "Stop all": `abortAsync` for every session active at the call (as this instance knows them;
   * `queued` drops their waiting inputs too). Resolves with the sessions whose turn stopped; a
   * failed stop is logged and left out.
   */
  abortAll(options: Omit<AbortOptions, 'turnId'> = {}): Promise<string[]> {
    return this.admin.abortAll(options);
  }

  /**
   * Decides a tool call waiting for approval (README, "Human approval before a tool runs"):
   * approved, it runs; denied, the model is told so, by whom and why. `false` when the session
   * has no such call waiting (in distributed mode the decision goes to the instance running it).
   */
  approve(sessionId: string, callId: string, decision: ApprovalDecision): Promise<boolean> {
    return this.dispatcher.approve(sessionId, callId, decision);
  }

  /** The session's tool calls waiting for approval, oldest first (from wherever its turn runs). */
  approvals(sessionId: string): Promise<PendingApproval[]> {
    return this.dispatcher.approvals(sessionId);
  }

  /**
   * One session now: state, running turn, waiting count, settings, last turn. `undefined` when
   * it has no settings and nothing runs, waits or holds it.
   */
  getSession(sessionId: string): Promise<SessionView | undefined> {
    return this.admin.getSession(sessionId);
  }

  /** Sessions with settings, most recent activity first, by pages: see `SessionListQuery`. */
  listSessions(query: SessionListQuery = {}): Promise<SessionList> {
    return this.admin.listSessions(query);
  }

  /**
   * Creates the session's settings when it has none (so a model can be set before its first
   * message) and sets the fields given (`model`, `think`, `maxToolIterations`, `historyLimit`).
   * Throws `ModelNotFoundError` when no provider serves the model, a `TypeError` naming a field
   * of the wrong type. Resolves with the session as `getSession` shows it.
   */
  updateSession(sessionId: string, settings: SessionSettingsPatch): Promise<SessionView> {
    return this.admin.updateSession(sessionId, settings);
  }

  /**
   * S4: stops the sessions' running turns, drops their waiting inputs (not archived), waits
   * for them to settle, then runs `clear` while the sessions are held. `undefined` = all
   * sessions. The hold is released even when `clear` throws; the error is rethrown (I10).
   */
  clearing(
    sessionIds: readonly string[] | undefined,
    clear: () => unknown,
    reason?: string,
  ): Promise<void> {
    return this.admin.clearing(sessionIds, clear, reason);
  }

  /**
   * Clears the history of the sessions (`undefined` = all) through `clearing` (S4): stops and
   * holds them, deletes their history, releases them. Resolves with what was cleared.
   */
  clearHistory(sessionIds?: readonly string[], reason?: string): Promise<string[] | 'all'> {
    return this.admin.clearHistory(sessionIds, reason);
  }

  /**
   * Deletes a session (S7), the whole job: holds it, emits `session:deleted` and waits for its
   * listeners (the agent's own stops the session and moves its generation), then deletes its
   * history and settings.
   */
  deleteSession(sessionId: string): Promise<void> {
    return this.admin.deleteSession(sessionId);
  }

  /** S5: registers a preprocessor; the same name replaces the earlier one. Returns dispose. */
  registerPreprocessor(name: string, fn: Preprocessor): () => void {
    this.preprocessors.get(name)?.();
    const dispose = this.hooks.use(
      'agent:input:before',
      (ctx, next) =>
        fn(ctx.message, async (replacement?: IncomingMessage) => {
          if (replacement) ctx.message = { ...replacement, sessionId: ctx.message.sessionId };
          await next();
        }),
      { owner: `preprocessor:${name}` },
    );
    const remove = () => {
      if (this.preprocessors.get(name) === remove) this.preprocessors.delete(name);
      dispose();
    };
    this.preprocessors.set(name, remove);
    return remove;
  }

  /**
   * S6: sets the session's conversation model. Throws `SessionNotFoundError` when the session
   * has no settings, `ModelNotFoundError` when no provider serves the model.
   */
  assignModel(sessionId: string, model: ModelRef): Promise<void> {
    return this.admin.assignModel(sessionId, model);
  }

  /** `token:request`: a usage snapshot of the session's current messages (no model call). */
  async requestUsage(sessionId: string): Promise<TokenUsageEvent> {
    const event = await this.snapshots.snapshot(sessionId);
    this.events.emit('token:usage', event);
    return event;
  }

  /** Whether a new input of the session would find its waiting list full (`maxWaiting`). */
  isQueueFull(sessionId: string): boolean {
    return this.dispatcher.view.waitingCount(sessionId) >= this.options.maxWaiting;
  }

  /** The session's waiting inputs (S8), from this instance's view. */
  waiting(sessionId: string): IncomingMessage[] {
    return this.dispatcher.view.waiting(sessionId);
  }

  /** The session's running turn id, if any, from this instance's view. */
  runningTurn(sessionId: string): string | undefined {
    return this.dispatcher.view.runningTurn(sessionId);
  }

  /** S9: stop accepting, abort running turns, drop waiting inputs, wait until all settled. */
  async beforeApplicationShutdown(): Promise<void> {
    this.gate.close();
    const all = Promise.all([this.dispatcher.drain(), ...this.gate.pending()]);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.shutdownTimeoutMs);
    });
    const outcome = await Promise.race([all, timeout]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.logger.warn('Shutdown drain timed out; some turns may not have settled');
    }
  }

  async onApplicationShutdown(): Promise<void> {
    for (const off of this.unsubscribe.splice(0)) off();
    for (const dispose of [...this.preprocessors.values()]) dispose();
    try {
      await this.moduleOptions.onShutdown?.();
    } catch (error) {
      this.logger.error(`AgentModule onShutdown failed: ${String(error)}`);
    }
  }

  /**
   * S7: the agent's `session:deleted` listener. Runs inside a clearing hold without waiting for
   * it (no deadlock): moves the generation, stops the running turn, drops waiting inputs (not
   * archived) and resolves once the session has settled.
   */
  private async onSessionDeleted(sessionId: string): Promise<void> {
    this.gate.markDeleted(sessionId);
    // Stop and drop synchronously, before anything is awaited: nothing of the old generation may
    // open a turn meanwhile. A failing generation store still waits for the stop.
    const stopped = this.dispatcher.stop(sessionId, 'deleted', 'session deleted');
    try {
      await this.stores.sessions.advanceGeneration(sessionId);
    } finally {
      await stopped;
    }
  }
}
