import type { IncomingMessage, Message, NewMessage, SessionKind } from './messages';
import type { ModelRef } from './llm';
import type { Settlement, TurnRecord } from './turn';

/** Per-session settings (C1). Unset fields fall back to the module options. */
export interface SessionSettings {
  sessionId: string;
  model?: ModelRef;
  /** Deep thinking (reasoning) for this session's model calls. */
  think?: boolean;
  maxToolIterations?: number;
  /** History count limit; 0 = no count limit. */
  historyLimit?: number;
  kind?: SessionKind;
  /**
   * The record of the session's last finished turn, written by the agent (H4), with when it
   * ended (ISO-8601; absent in records written before it was kept).
   */
  lastTurn?: TurnRecord & { turnId: string; endedAt?: string };
}

/** What a session is doing now: a turn runs, inputs wait, a hold covers it, or nothing. */
export type SessionState = 'running' | 'waiting' | 'idle' | 'held';

/** The settings an administrator sets on a session (all optional; see `SessionSettings`). */
export type SessionSettingsPatch = Pick<
  SessionSettings,
  'model' | 'think' | 'maxToolIterations' | 'historyLimit'
>;

/** One session as `AgentService.getSession` shows it. */
export interface SessionView {
  sessionId: string;
  state: SessionState;
  /** The running turn's id (state `running`). */
  runningTurnId?: string;
  /** How many inputs wait (pending insertions and queued inputs). */
  waiting: number;
  /** Distributed mode: the instance that runs the session now. */
  holder?: string;
  settings: SessionSettingsPatch;
  lastTurn?: SessionSettings['lastTurn'];
}

/** One session as `AgentService.listSessions` lists it. */
export interface SessionSummary {
  sessionId: string;
  state: SessionState;
  /** The running turn's id (state `running`). */
  runningTurnId?: string;
  /** How many inputs wait (pending insertions and queued inputs). */
  waiting: number;
  lastTurn?: SessionSettings['lastTurn'];
  /** The session's conversation model, when one is set. */
  model?: ModelRef;
  /**
   * ISO-8601 time of the session's last activity (its last accepted input or ended turn; when
   * its settings were created, before either): what the list is ordered by.
   */
  updatedAt: string;
}

/**
 * A query of `AgentService.listSessions`, which answers the sessions that have settings, most
 * recent activity first, their state as `getSession` shows it. It throws a `TypeError` naming a
 * bad field, and `StoreMethodMissingError` when the bound `SessionStore` has no `listByActivity`.
 */
export interface SessionListQuery {
  /** Sessions per page: 1 to 200, 50 when absent. */
  limit?: number;
  /** `nextCursor` of the page before: the next page. */
  cursor?: string;
  /** Only the sessions in this state. */
  state?: SessionState;
}

/** A page of `AgentService.listSessions`: most recent activity first. */
export interface SessionList {
  sessions: SessionSummary[];
  /** Present when more sessions follow: the `cursor` of the next page (opaque). */
  nextCursor?: string;
}

/**
 * A session's place in the activity order of `SessionStore.listByActivity`: its last activity
 * (ISO-8601) and its id. Sessions are ordered by activity, most recent first, then by id
 * (descending, in binary order) among equal times.
 */
export interface SessionActivityKey {
  activeAt: string;
  sessionId: string;
}

/** A page query of `SessionStore.listByActivity`. */
export interface SessionActivityQuery {
  /** Most sessions to return (1 or more). */
  limit: number;
  /** Only the sessions that come after this place in the order (exclusive): the next page. */
  after?: SessionActivityKey;
  /** Only these sessions (a store must honour it): the agent lists running ones with it. */
  sessionIds?: readonly string[];
}

/** One session as `SessionStore.listByActivity` answers it: its settings and last activity. */
export interface SessionActivity {
  settings: SessionSettings;
  /**
   * ISO-8601 time of the session's last activity: its last accepted input or ended turn; when it
   * had neither yet, when its settings were created.
   */
  activeAt: string;
}

/** Options of `SessionStore.ensure`. */
export interface SessionEnsureOptions {
  /**
   * An input of the session was accepted at this time (ISO-8601): the session's activity moves
   * to it (never back), in the same write that creates the settings when they are missing.
   */
  activeAt?: string;
}

/**
 * Session state the agent reads and writes: settings, generations and model assignment, and
 * each session's last activity (an accepted input or an ended turn) for the session list.
 * Bind your own with `{ provide: SessionStore, useValue: mine }`.
 */
export interface SessionStore {
  get(sessionId: string): Promise<SessionSettings | undefined>;
  /**
   * Creates the settings when missing (with `defaults`); returns them unchanged otherwise. With
   * `options.activeAt` it also records the session's activity (see `SessionEnsureOptions`).
   */
  ensure(
    sessionId: string,
    defaults?: Omit<SessionSettings, 'sessionId'>,
    options?: SessionEnsureOptions,
  ): Promise<SessionSettings>;
  /**
   * Changes existing settings; throws `SessionNotFoundError` when there are none. A patch with
   * a `lastTurn` that has `endedAt` (a turn ended) moves the session's activity to that time
   * (never back), in the same write.
   */
  update(sessionId: string, patch: Omit<SessionSettings, 'sessionId'>): Promise<SessionSettings>;
  /** Removes the settings (the generation counter is kept). */
  delete(sessionId: string): Promise<void>;
  /** The session id's generation: it changes when deletion of the session starts (S7). */
  generationOf(sessionId: string): Promise<number>;
  /** Moves the generation on; returns the new one. */
  advanceGeneration(sessionId: string): Promise<number>;
  /** Ids of sessions that have settings. */
  list?(): Promise<string[]>;
  /**
   * Optional: the sessions that have settings, most recent activity first (then id, descending),
   * at most `limit`, after `query.after` when given. `AgentService.listSessions` (and
   * `GET /agent/sessions`) needs it: without it they refuse with `StoreMethodMissingError`.
   * Paging by the last answer's place is stable: a session whose activity changes meanwhile
   * moves ahead of the pages already read and never makes an unchanged one be skipped.
   */
  listByActivity?(query: SessionActivityQuery): Promise<SessionActivity[]>;
}

/** Injection token of the session store. */
export const SessionStore = Symbol.for('agent:SessionStore');

/** Options of a history read. */
export interface HistoryQuery {
  /**
   * Number of conversation messages to return, counted from the newest; control-kind messages
   * among them come along but do not count. 0 or absent = all.
   */
  limit?: number;
  /**
   * Only messages stored before the message with this id (exclusive): the next older page. A
   * message id the session does not have gives an empty history.
   */
  before?: string;
}

/** The session's history, as the agent reads it. */
export interface HistoryStore {
  /** Active messages in order, oldest first, within `limit` conversation messages. */
  history(sessionId: string, query?: HistoryQuery): Promise<Message[]>;
  /**
   * Optional: `history` for a reader that changes nothing it gets (the agent building a model
   * call). A store that keeps immutable (frozen) records returns them as they are, with no copy
   * per read; without it the agent calls `history`.
   */
  readonlyHistory?(sessionId: string, query?: HistoryQuery): Promise<readonly Readonly<Message>[]>;
  /** Number of active conversation messages (control kinds excluded). */
  count(sessionId: string): Promise<number>;
  /** Removes the history of one session, or of all sessions when `sessionId` is undefined. */
  clear(sessionId?: string): Promise<void>;
  /** Deletes exactly the messages that carry this turn id; returns how many. */
  rollbackTurn(sessionId: string, turnId: string): Promise<number>;
  /** Removes everything of the session. */
  deleteSession(sessionId: string): Promise<void>;
}

/** Injection token of the history store. */
export const HistoryStore = Symbol.for('agent:HistoryStore');

/** Where the agent persists inputs, tool-call groups, replies and markers. */
export interface MessageArchive {
  /**
   * Persists the messages in order, atomically (a tool-call group is one call). A message with
   * a `key` already persisted is not written again; the stored one is returned.
   */
  append(messages: NewMessage[]): Promise<Message[]>;
}

/** Injection token of the message archive. */
export const MessageArchive = Symbol.for('agent:MessageArchive');

/** An input as the inbox keeps it, from its acceptance until it settles. */
export interface InboxEntry {
  /** `IncomingMessage.id` when the caller gave one, else generated at acceptance. */
  id: string;
  sessionId: string;
  /** The input as accepted (after preprocessing), with its `id`. */
  message: IncomingMessage & { id: string };
  /** Arrival order across the inbox (grows with every accepted input). */
  seq: number;
  /** ISO time of acceptance. */
  acceptedAt: string;
  /** The turn it entered (opened or joined), once it did. */
  turnId?: string;
  /** How it settled, once it did (the first settlement stays). */
  settlement?: Settlement;
}

/** How an input is handed to `InputInbox.accept`. */
export interface InboxAcceptOptions {
  /**
   * The id was made by the agent (the caller sent none): no later delivery can repeat it, so
   * the entry serves no deduplication once settled, and a store may forget it at its
   * settlement (the memory inbox does; the SQL ones keep it until `prune`, as any other).
   */
  generatedId?: boolean;
}

/**
 * The durable record of accepted inputs (nothing accepted is lost): an input is recorded when
 * it is accepted and stays until it settles, so a restarted server resumes the waiting ones in
 * arrival order and closes the turns a crash interrupted. Idempotent by id.
 */
export interface InputInbox {
  /**
   * Records an accepted input. A known id is not recorded again: the existing entry comes back
   * with `duplicate: true` (its settlement too, when it has one).
   */
  accept(
    message: IncomingMessage & { id: string },
    options?: InboxAcceptOptions,
  ): Promise<{ entry: InboxEntry; duplicate: boolean }>;
  /** The inputs entered turn `turnId` (opened or joined). */
  enterTurn(ids: readonly string[], turnId: string): Promise<void>;
  /** Settles the inputs; an entry already settled keeps its first settlement. */
  settle(ids: readonly string[], settlement: Settlement): Promise<void>;
  /** One entry by id. */
  get(id: string): Promise<InboxEntry | undefined>;
  /** The unsettled entries in arrival order, of one session or all. */
  unsettled(sessionId?: string): Promise<InboxEntry[]>;
  /** Forgets entries settled before `before` (ISO time); resolves with how many. */
  prune(before: string): Promise<number>;
  /** Forgets every entry of a session (its deletion). */
  deleteSession(sessionId: string): Promise<void>;
}

/** Injection token of the input inbox. */
export const InputInbox = Symbol.for('agent:InputInbox');

/**
 * Distributed mode's fencing of writes, as a store asks it: which fence a write of a session
 * carries. The instance that holds a session's lease answers with its grant's fence (the fence
 * of the turn when `turnId` names one it runs), and the store refuses the write, whole, with
 * `FencedWriteError` when it has seen a newer fence for the session. `undefined`: the write is
 * not fenced (in-process mode; an input accepted for a session another instance runs).
 */
export interface WriteFencing {
  fenceFor(sessionId: string, turnId?: string): number | undefined;
  /**
   * The session of an input this instance runs though another instance accepted it (its session
   * came with it), if known: a fenced write of its inbox entry then need not read the entry's
   * session first. A wrong answer costs only that read (the write checks the session). Optional.
   */
  sessionOfInput?(inputId: string): string | undefined;
  /** Told, before the store throws `FencedWriteError`, that it refused a write of `fence`. */
  refused?(sessionId: string, fence: number): void;
}
