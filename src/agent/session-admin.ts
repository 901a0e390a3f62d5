import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  escapeForLog,
  ModelNotFoundError,
  WorkDispatcher,
  type AbortOptions,
  type ModelRef,
  type SessionSettingsPatch,
  type SessionState,
  type SessionView,
  type WorkDispatcher as WorkDispatcherPort,
} from '../contracts';
import { ModelRegistry } from '../llm';
import { GUARDED_STORES, type GuardedStores } from './store-guard';

/**
 * Session administration behind `AgentService` (issue 16): stop all, one session's state and
 * settings, settings made before a session's first message. @internal
 */
@Injectable()
export class SessionAdmin {
  private readonly logger = new Logger('AgentService');

  constructor(
    @Inject(WorkDispatcher) private readonly dispatcher: WorkDispatcherPort,
    @Inject(GUARDED_STORES) private readonly stores: GuardedStores,
    private readonly models: ModelRegistry,
  ) {}

  /** See `AgentService.abortAll`. */
  async abortAll(options: Omit<AbortOptions, 'turnId'>): Promise<string[]> {
    // Every session's own stop, whatever turn runs there: no turnId, even from a JS caller.
    const { queued, reason, by } = options;
    const stop: AbortOptions = { queued, reason, by };
    const sessions = this.dispatcher.view.activeSessions();
    const answers = await Promise.allSettled(sessions.map((id) => this.dispatcher.abort(id, stop)));
    const stopped: string[] = [];
    answers.forEach((answer, i) => {
      if (answer.status === 'fulfilled') {
        if (answer.value) stopped.push(sessions[i]);
        return;
      }
      this.logger.error(
        `Abort of session ${escapeForLog(sessions[i])} failed: ${String(answer.reason)}`,
      );
    });
    return stopped;
  }

  /** See `AgentService.getSession`. */
  async getSession(sessionId: string): Promise<SessionView | undefined> {
    const settings = await this.stores.sessions.get(sessionId);
    const view = this.dispatcher.view;
    const runningTurnId = view.runningTurn(sessionId);
    const waiting = view.waitingCount(sessionId);
    const held = view.isHeld(sessionId);
    if (!settings && runningTurnId === undefined && waiting === 0 && !held) return undefined;
    const state: SessionState = held
      ? 'held'
      : runningTurnId !== undefined
        ? 'running'
        : waiting > 0
          ? 'waiting'
          : 'idle';
    return {
      sessionId,
      state,
      ...(runningTurnId !== undefined ? { runningTurnId } : {}),
      waiting,
      settings: settingsOf(settings),
      ...(settings?.lastTurn ? { lastTurn: settings.lastTurn } : {}),
    };
  }

  /** See `AgentService.assignModel` (S6). */
  async assignModel(sessionId: string, model: ModelRef): Promise<void> {
    this.requireServed(model);
    await this.stores.sessions.update(sessionId, { model: { ...model } });
  }

  /** See `AgentService.updateSession`. */
  async updateSession(sessionId: string, patch: SessionSettingsPatch): Promise<SessionView> {
    const changes = checkedPatch(patch);
    if (changes.model) this.requireServed(changes.model);
    await this.stores.sessions.ensure(sessionId, {});
    if (Object.keys(changes).length) await this.stores.sessions.update(sessionId, changes);
    return (await this.getSession(sessionId))!;
  }

  /** Throws `ModelNotFoundError` when no provider serves `model`. */
  private requireServed(model: ModelRef): void {
    if (!this.models.resolve(model)) {
      throw new ModelNotFoundError(
        model,
        this.models.list().map((p) => p.id),
      );
    }
  }
}

/** The administrable part of the settings, only the fields that are set. */
function settingsOf(settings: SessionSettingsPatch | undefined): SessionSettingsPatch {
  if (!settings) return {};
  const { model, think, maxToolIterations, historyLimit } = settings;
  return {
    ...(model ? { model: { ...model } } : {}),
    ...(think !== undefined ? { think } : {}),
    ...(maxToolIterations !== undefined ? { maxToolIterations } : {}),
    ...(historyLimit !== undefined ? { historyLimit } : {}),
  };
}

/**
 * The patch as it is written: only the fields given, each checked (a host calling the library
 * gets the same refusals as the REST route's validation). Throws a `TypeError` naming the field.
 */
function checkedPatch(patch: SessionSettingsPatch): SessionSettingsPatch {
  const { model, think, maxToolIterations, historyLimit } = patch ?? {};
  if (model !== undefined && (typeof model?.model !== 'string' || !model.model.trim())) {
    throw new TypeError('model.model must be a non-empty string');
  }
  if (model?.provider !== undefined && typeof model.provider !== 'string') {
    throw new TypeError('model.provider must be a string');
  }
  if (think !== undefined && typeof think !== 'boolean') {
    throw new TypeError('think must be a boolean');
  }
  for (const [name, value] of [
    ['maxToolIterations', maxToolIterations],
    ['historyLimit', historyLimit],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 0)) {
      throw new TypeError(`${name} must be a whole number, 0 or more`);
    }
  }
  return settingsOf({ model, think, maxToolIterations, historyLimit });
}
