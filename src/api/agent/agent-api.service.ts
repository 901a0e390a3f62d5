import { Injectable, Logger } from '@nestjs/common';
import type { AgentService } from '../../agent';
import {
  conversationTail,
  ModelNotFoundError,
  SessionNotFoundError,
  StoreUnavailableError,
  type AbortOptions,
  type Actor,
  type HistoryStore as HistoryStorePort,
  type IncomingMessage,
  type ModelRef,
  type SessionList,
  type SessionListQuery,
  type SessionSettingsPatch,
  type SessionView,
  type Settlement,
  type TokenUsageEvent,
} from '../../contracts';
import { AgentBackend } from '../agent-backend';
import { ApprovalNotFoundException, ModelRefusedException } from '../http/api-error';
import { errorForLog, escapeForLog } from '../http/escape-for-log';
import type {
  AcceptedResponse,
  ClearedResponse,
  HistoryResponse,
  QueueResponse,
  SettledResponse,
} from './agent-response.dto';
import { mapSettlement, refusalOf } from './agent.mapping';
import type { ApprovalsResponse, DecidedResponse } from './approvals.dto';

/**
 * What the REST routes and socket events do, one method each, over `AgentService` and the
 * session stores. Controllers and the gateway stay plumbing.
 */
@Injectable()
export class AgentApiService {
  private readonly logger = new Logger('AgentApi');

  constructor(private readonly backend: AgentBackend) {}

  private get agent(): AgentService {
    return this.backend.service;
  }

  private get history(): HistoryStorePort {
    return this.backend.history;
  }

  /**
   * Hands an input to the agent. Without `wait` it answers at once and the settlement runs on
   * (its rejection is logged, never unhandled); with `wait` it answers with the settlement, or
   * throws `InputRefusedException` (429 / 503) for an input the agent could not take now.
   */
  async submit(
    message: IncomingMessage,
    wait: boolean,
  ): Promise<AcceptedResponse | SettledResponse> {
    // Distributed mode without Redis: refused (503) before anything is recorded.
    this.backend.distribution?.assertAccepting();
    // Without `wait` the answer comes before the settlement: a full waiting list is refused here
    // (429), as the agent would drop the input at once.
    if (!wait && this.agent.isQueueFull(message.sessionId)) {
      throw refusalOf({ settled: 'dropped', reason: 'queue-full' })!;
    }
    if (wait) {
      const settlement = await this.agent.handleMessage(message);
      const refusal = refusalOf(settlement);
      if (refusal) throw refusal;
      return mapSettlement(settlement);
    }
    await this.accept(message);
    return { accepted: true };
  }

  /**
   * Hands an input to the agent and resolves once it is durable, with its settlement to come
   * (a rejection is logged, never unhandled); refused as `submit` without `wait` refuses (429,
   * 503). For the routes that stream the turn that settles the input.
   */
  async accept(message: IncomingMessage): Promise<{ settlement: Promise<Settlement> }> {
    this.backend.distribution?.assertAccepting();
    if (this.agent.isQueueFull(message.sessionId)) {
      throw refusalOf({ settled: 'dropped', reason: 'queue-full' })!;
    }
    // Accepted only once the input is durable; one the store could not take is refused (503).
    const { accepted, settlement: settled } = this.agent.submit(message);
    const early = await accepted.catch(() => undefined);
    const refusal = early && refusalOf(early);
    if (refusal) throw refusal;
    settled.catch((error: unknown) =>
      this.logger.warn(
        `Input for session ${escapeForLog(message.sessionId)} was refused: ${errorForLog(error)}`,
      ),
    );
    return { settlement: settled };
  }

  /** S3: stops the session's running turn; answers as the instance running it does. */
  async abort(sessionId: string, options: AbortOptions): Promise<{ stopped: boolean }> {
    return { stopped: await this.agent.abortAsync(sessionId, options) };
  }

  /** The session's tool calls waiting for approval (wherever its turn runs), oldest first. */
  async approvals(sessionId: string): Promise<ApprovalsResponse> {
    const pending = await this.agent.approvals(sessionId);
    const approvals = pending.map(({ callId, turnId, name, args, requestedAt }) => ({
      callId,
      turnId,
      name,
      args,
      requestedAt,
    }));
    return { approvals };
  }

  /**
   * Decides a tool call waiting for approval, `by` the caller (on the instance running its turn);
   * whether the session had such a call waiting.
   */
  decide(
    sessionId: string,
    callId: string,
    decision: { approved: boolean; reason?: string },
    by: Actor | undefined,
  ): Promise<boolean> {
    const { approved, reason } = decision;
    return this.agent.approve(sessionId, callId, {
      approved,
      ...(reason !== undefined ? { reason } : {}),
      ...(by ? { by } : {}),
    });
  }

  /** `decide` for the REST route: `ApprovalNotFoundException` (404) when nothing was decided. */
  async approve(
    sessionId: string,
    callId: string,
    decision: { approved: boolean; reason?: string },
    by: Actor | undefined,
  ): Promise<DecidedResponse> {
    if (!(await this.decide(sessionId, callId, decision, by))) {
      throw new ApprovalNotFoundException(sessionId, callId);
    }
    return { decided: true };
  }

  /** One session's state and settings; `SessionNotFoundError` (404) for one unknown. */
  async session(sessionId: string): Promise<SessionView> {
    const view = await this.agent.getSession(sessionId);
    if (!view) throw new SessionNotFoundError(sessionId);
    return view;
  }

  /**
   * The sessions, most recent activity first, a page at a time; `StoreMethodMissingError` (501)
   * when the bound session store cannot list them.
   */
  sessions(query: SessionListQuery): Promise<SessionList> {
    return this.agent.listSessions(query);
  }

  /**
   * Creates or updates a session's settings (a model may be set before the first message).
   * `ModelNotFoundError` (422) for a model no provider serves.
   */
  updateSession(sessionId: string, settings: SessionSettingsPatch): Promise<SessionView> {
    return this.agent.updateSession(sessionId, settings);
  }

  /** "Stop all": S3 for every session with a running turn; answers the sessions stopped. */
  async abortAll(options: AbortOptions): Promise<{ stopped: string[] }> {
    return { stopped: await this.agent.abortAll(options) };
  }

  /**
   * S6: assigns the session's model. `SessionNotFoundError` (404), `ModelNotFoundError` (422)
   * and `StoreUnavailableError` (503) pass through; any other failure is the store refusing the
   * write (422 in a plain sentence: the store's own text may name its internals, so it is only
   * logged).
   */
  async assignModel(sessionId: string, model: ModelRef): Promise<void> {
    try {
      await this.agent.assignModel(sessionId, model);
    } catch (error) {
      if (
        error instanceof SessionNotFoundError ||
        error instanceof ModelNotFoundError ||
        error instanceof StoreUnavailableError
      ) {
        throw error;
      }
      this.logger.warn(
        `Model assignment of session ${escapeForLog(sessionId)} failed: ${errorForLog(error)}`,
      );
      throw new ModelRefusedException();
    }
  }

  /** S4: clears the history of the sessions (all when `sessionIds` is undefined). */
  async clear(sessionIds: string[] | undefined, reason?: string): Promise<ClearedResponse> {
    return { cleared: await this.agent.clearHistory(sessionIds, reason) };
  }

  /** S7: deletes a session: `session:deleted` listeners, its history, its settings. */
  deleteSession(sessionId: string): Promise<void> {
    return this.agent.deleteSession(sessionId);
  }

  /** S8: the session's waiting inputs. */
  queue(sessionId: string): QueueResponse {
    return { sessionId, waiting: this.agent.waiting(sessionId) };
  }

  /** `token:request`: a usage snapshot (no `turnId`). */
  usage(sessionId: string): Promise<TokenUsageEvent> {
    return this.agent.requestUsage(sessionId);
  }

  /** The session's persisted messages with their metadata. */
  async historyOf(
    sessionId: string,
    page: { limit: number; before?: string },
  ): Promise<HistoryResponse> {
    // One conversation message more than the page: whether older ones exist, in the same read.
    const query = { limit: page.limit + 1, ...(page.before ? { before: page.before } : {}) };
    const read = await this.history.history(sessionId, query);
    const messages = conversationTail(read, page.limit);
    const older = messages.length < read.length;
    return older && messages.length ? { messages, nextBefore: messages[0].id } : { messages };
  }
}
