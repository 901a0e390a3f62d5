import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import {
  ModelNotFoundError,
  WorkDispatcher,
  type WorkDispatcher as WorkDispatcherPort,
  type AbortOptions,
  type IncomingMessage,
  type ModelRef,
  type Settlement,
  type TokenUsageEvent,
} from '../contracts';
import { AGENT_MODULE_OPTIONS } from './agent.module-definition';
import type { AgentModuleOptions } from './agent.options';
import { AGENT_TURN_DEPS } from './agent.tokens';
import { HoldTable, InputGate, type TurnDeps } from './engine';
import { UsageSnapshots } from './usage-snapshots';

/** A preprocessor's `next`: continue, optionally with a replacement message. */
export type PreprocessorNext = (message?: IncomingMessage) => Promise<void>;

/** A preprocessor (S5): runs once per input on `agent:input:before`. */
export type Preprocessor = (
  message: IncomingMessage,
  next: PreprocessorNext,
) => Promise<void> | void;

/**
 * The contract's service (S1-S9): hand it inputs, stop turns, clear history, register
 * preprocessors, assign models, ask for usage snapshots.
 */
@Injectable()
export class AgentService
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly logger = new Logger('AgentService');
  private readonly preprocessors = new Map<string, () => void>();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    @Inject(AGENT_TURN_DEPS) private readonly deps: TurnDeps,
    @Inject(AGENT_MODULE_OPTIONS) private readonly moduleOptions: AgentModuleOptions,
    @Inject(WorkDispatcher) private readonly dispatcher: WorkDispatcherPort,
    private readonly holds: HoldTable,
    private readonly gate: InputGate,
    private readonly snapshots: UsageSnapshots,
  ) {}

  onModuleInit(): void {
    for (const tool of this.moduleOptions.tools ?? []) {
      this.unsubscribe.push(this.deps.tools.register(tool, 'AgentModule'));
    }
    this.unsubscribe.push(
      this.deps.events.on('session:deleted', ({ sessionId }) => this.onSessionDeleted(sessionId)),
      this.deps.events.on('token:request', ({ sessionId }) =>
        this.requestUsage(sessionId).catch((error: unknown) =>
          this.logger.debug(`token:request for ${sessionId} failed: ${String(error)}`),
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

  /** S3: stops the running turn (when `turnId` matches); returns whether it stopped one. */
  abort(sessionId: string, options: AbortOptions = {}): boolean {
    return this.dispatcher.abort(sessionId, options);
  }

  /**
   * S4: stops the sessions' running turns, drops their waiting inputs (not archived), waits
   * for them to settle, then runs `clear` while the sessions are held. `undefined` = all
   * sessions. The hold is released even when `clear` throws; the error is rethrown (I10).
   */
  async clearing(
    sessionIds: readonly string[] | undefined,
    clear: () => unknown,
    reason?: string,
  ): Promise<void> {
    const release = this.holds.hold(sessionIds);
    try {
      const targets = sessionIds ?? this.dispatcher.activeSessions();
      await Promise.all(targets.map((id) => this.dispatcher.stop(id, 'cleared', reason)));
      await clear();
    } finally {
      release();
      this.dispatcher.resume();
    }
  }

  /** S5: registers a preprocessor; the same name replaces the earlier one. Returns dispose. */
  registerPreprocessor(name: string, fn: Preprocessor): () => void {
    this.preprocessors.get(name)?.();
    const dispose = this.deps.hooks.use(
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
  async assignModel(sessionId: string, model: ModelRef): Promise<void> {
    const resolved = this.deps.models.resolve(model);
    if (!resolved) {
      throw new ModelNotFoundError(
        model,
        this.deps.models.list().map((p) => p.id),
      );
    }
    await this.deps.sessions.update(sessionId, { model: { ...model } });
  }

  /** `token:request`: a usage snapshot of the session's current messages (no model call). */
  async requestUsage(sessionId: string): Promise<TokenUsageEvent> {
    const event = await this.snapshots.snapshot(sessionId);
    this.deps.events.emit('token:usage', event);
    return event;
  }

  /** The session's waiting inputs (S8). */
  waiting(sessionId: string): IncomingMessage[] {
    return this.dispatcher.waiting(sessionId);
  }

  /** The session's running turn id, if any. */
  runningTurn(sessionId: string): string | undefined {
    return this.dispatcher.runningTurn(sessionId);
  }

  /** S9: stop accepting, abort running turns, drop waiting inputs, wait until all settled. */
  async beforeApplicationShutdown(): Promise<void> {
    this.gate.close();
    const stops = this.dispatcher
      .activeSessions()
      .map((id) => this.dispatcher.stop(id, 'shutdown', 'shutdown'));
    const all = Promise.all([...stops, ...this.gate.pending()]);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.deps.options.shutdownTimeoutMs);
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
      await this.deps.sessions.advanceGeneration(sessionId);
    } finally {
      await stopped;
    }
  }
}
