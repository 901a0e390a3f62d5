import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  escapeForLog,
  ModelNotFoundError,
  StoreMethodMissingError,
  WorkDispatcher,
  type AbortOptions,
  type DispatchView,
  type ModelRef,
  type SessionActivity,
  type SessionActivityKey,
  type SessionActivityQuery,
  type SessionList,
  type SessionListQuery,
  type SessionSettings,
  type SessionSettingsPatch,
  type SessionState,
  type SessionSummary,
  type SessionView,
  type WorkDispatcher as WorkDispatcherPort,
} from '../contracts';
import { ModelRegistry } from '../llm';
import { AgentEventBus } from './agent-event.bus';
import { checkedListQuery, encodeSessionCursor } from './session-cursor';
import { GUARDED_STORES, type GuardedStores } from './store-guard';

/** Most session ids one `listByActivity` call filters by (a bound on query parameters). */
const IDS_PER_QUERY = 500;

/**
 * Session administration behind `AgentService` (issue 16): stop all, clearing and deletion, one
 * session's state and settings, settings made before a session's first message. @internal
 */
@Injectable()
export class SessionAdmin {
  private readonly logger = new Logger('AgentService');

  constructor(
    @Inject(WorkDispatcher) private readonly dispatcher: WorkDispatcherPort,
    @Inject(GUARDED_STORES) private readonly stores: GuardedStores,
    private readonly models: ModelRegistry,
    private readonly events: AgentEventBus,
  ) {}

  /** See `AgentService.clearing` (S4). */
  async clearing(
    sessionIds: readonly string[] | undefined,
    clear: () => unknown,
    reason?: string,
  ): Promise<void> {
    const release = await this.dispatcher.hold(sessionIds, reason);
    try {
      await clear();
    } finally {
      await release();
    }
  }

  /** See `AgentService.clearHistory`. */
  async clearHistory(sessionIds?: readonly string[], reason?: string): Promise<string[] | 'all'> {
    const ids = sessionIds ? [...new Set(sessionIds)] : undefined;
    const clear = async () => {
      if (!ids) return this.stores.history.clear();
      for (const id of ids) await this.stores.history.clear(id);
    };
    await this.clearing(ids, clear, reason);
    return ids ?? 'all';
  }

  /** See `AgentService.deleteSession` (S7). */
  async deleteSession(sessionId: string): Promise<void> {
    await this.clearing([sessionId], async () => {
      await this.events.emitAsync('session:deleted', { sessionId });
      await this.stores.history.deleteSession(sessionId);
      await this.stores.sessions.delete(sessionId);
      await this.stores.inbox.deleteSession(sessionId);
    });
  }

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
    const now = stateOf(this.dispatcher.view, sessionId);
    if (!settings && now.state === 'idle') return undefined;
    return viewOf(now, settings, this.dispatcher.view.holder?.(sessionId));
  }

  /**
   * See `AgentService.listSessions`: the sessions that have settings, most recent activity
   * first, their state from this instance's view. Running and waiting ones are looked up by id
   * (this instance knows them); the others are read in activity order, skipping the rest.
   */
  async listSessions(query: SessionListQuery = {}): Promise<SessionList> {
    const { limit, after, state } = checkedListQuery(query);
    if (!this.stores.sessions.listByActivity) {
      throw new StoreMethodMissingError('sessions', 'listByActivity');
    }
    // One more than the page: whether another page follows, in the same read.
    const found =
      state === 'running' || state === 'waiting'
        ? await this.listActive(state, limit + 1, after)
        : await this.scan(limit + 1, after, state);
    const sessions = found.slice(0, limit);
    if (found.length <= limit) return { sessions };
    const last = sessions[sessions.length - 1];
    return {
      sessions,
      nextCursor: encodeSessionCursor({ activeAt: last.updatedAt, sessionId: last.sessionId }),
    };
  }

  /** Up to `want` sessions in `state` (or any) in activity order after `after`. */
  private async scan(
    want: number,
    after: SessionActivityKey | undefined,
    state: SessionState | undefined,
  ): Promise<SessionSummary[]> {
    const view = this.dispatcher.view;
    // Filtering by idle skips at most the active sessions: one read usually suffices.
    const batch = state ? want + view.activeSessions().length : want;
    const found: SessionSummary[] = [];
    for (let from = after; ;) {
      const rows = await this.page({ limit: batch, ...(from ? { after: from } : {}) });
      for (const row of rows) {
        const summary = summaryOf(view, row);
        if (!state || summary.state === state) found.push(summary);
        if (found.length === want) return found;
      }
      if (rows.length < batch) return found;
      const last = rows[rows.length - 1];
      from = { activeAt: last.activeAt, sessionId: last.settings.sessionId };
    }
  }

  /** Up to `want` of this instance's running (or waiting) sessions in activity order. */
  private async listActive(
    state: 'running' | 'waiting',
    want: number,
    after: SessionActivityKey | undefined,
  ): Promise<SessionSummary[]> {
    const view = this.dispatcher.view;
    const ids = view.activeSessions().filter((id) => stateOf(view, id).state === state);
    const reads: Promise<SessionActivity[]>[] = [];
    for (let i = 0; i < ids.length; i += IDS_PER_QUERY) {
      const sessionIds = ids.slice(i, i + IDS_PER_QUERY);
      reads.push(this.page({ limit: want, sessionIds, ...(after ? { after } : {}) }));
    }
    return (await Promise.all(reads))
      .flat()
      .sort(byActivity)
      .map((row) => summaryOf(view, row))
      .filter((summary) => summary.state === state)
      .slice(0, want);
  }

  /** One read of the store's activity order (its presence is checked by `listSessions`). */
  private page(query: SessionActivityQuery): Promise<SessionActivity[]> {
    return this.stores.sessions.listByActivity!(query);
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
    // The settings as written: no read of them again for the answer.
    const ensured = await this.stores.sessions.ensure(sessionId, {});
    const settings = Object.keys(changes).length
      ? await this.stores.sessions.update(sessionId, changes)
      : ensured;
    const view = this.dispatcher.view;
    return viewOf(stateOf(view, sessionId), settings, view.holder?.(sessionId));
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

/** What the session is doing now, from this instance's view. */
function stateOf(
  view: DispatchView,
  sessionId: string,
): Pick<SessionView, 'sessionId' | 'state' | 'runningTurnId' | 'waiting'> {
  const runningTurnId = view.runningTurn(sessionId);
  const waiting = view.waitingCount(sessionId);
  const state: SessionState = view.isHeld(sessionId)
    ? 'held'
    : runningTurnId !== undefined
      ? 'running'
      : waiting > 0
        ? 'waiting'
        : 'idle';
  return { sessionId, state, ...(runningTurnId !== undefined ? { runningTurnId } : {}), waiting };
}

/** One session's view: its state now, its settings and its last turn. */
function viewOf(
  now: ReturnType<typeof stateOf>,
  settings: SessionSettings | undefined,
  holder: string | undefined,
): SessionView {
  return {
    ...now,
    ...(holder !== undefined ? { holder } : {}),
    settings: settingsOf(settings),
    ...(settings?.lastTurn ? { lastTurn: settings.lastTurn } : {}),
  };
}

/** One listed session: its state now, its last turn and model, its last activity. */
function summaryOf(view: DispatchView, { settings, activeAt }: SessionActivity): SessionSummary {
  return {
    ...stateOf(view, settings.sessionId),
    ...(settings.lastTurn ? { lastTurn: settings.lastTurn } : {}),
    ...(settings.model ? { model: { ...settings.model } } : {}),
    updatedAt: activeAt,
  };
}

/** The list's order: most recent activity first, then session id, descending. */
function byActivity(a: SessionActivity, b: SessionActivity): number {
  if (a.activeAt !== b.activeAt) return a.activeAt < b.activeAt ? 1 : -1;
  const x = a.settings.sessionId;
  const y = b.settings.sessionId;
  return x === y ? 0 : x < y ? 1 : -1;
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
