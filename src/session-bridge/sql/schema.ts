import type { Generated } from 'kysely';

/**
 * The tables of the SQL stores, one schema for SQLite and PostgreSQL (Kysely types). Column types
 * are chosen so both dialects behave the same: JSON is kept as text and times as ISO-8601 text,
 * so what is read back is exactly what was written, whichever database holds it.
 */

/** SQL dialects the stores run on. */
export type SqlDialect = 'sqlite' | 'postgres';

/** One persisted message (README.md, "What a turn writes"; rules: docs/behaviour.md P1-P5). */
export interface MessagesTable {
  /**
   * Stable order: a monotonically increasing integer (SQLite `INTEGER PRIMARY KEY AUTOINCREMENT`,
   * PostgreSQL `bigserial`). PostgreSQL returns it as a string (bigint).
   */
  seq: Generated<number | string>;
  /** The message's public id (a UUID), unique. */
  id: string;
  session_id: string;
  role: string;
  /** A control kind (`event-marker`, `turn-stopped`) or another kind; null for plain messages. */
  kind: string | null;
  content: string;
  /** `ToolCall[]` as JSON text. */
  tool_calls: string | null;
  tool_call_id: string | null;
  reasoning_content: string | null;
  /** `Message.metadata` as JSON text. */
  metadata: string;
  /** `metadata.turnId` when it is a string, denormalised for `rollbackTurn` (indexed). */
  turn_id: string | null;
  /** Idempotency key (`Message.key`): unique when set. */
  msg_key: string | null;
  /** ISO-8601 time of persistence. */
  created_at: string;
}

/** Per-session settings (`SessionSettings` without `sessionId`). */
export interface SessionsTable {
  session_id: string;
  /** `settings.kind`, denormalised so it can be queried. */
  kind: string | null;
  /** The settings as JSON text, without `sessionId`. */
  settings: string;
  /** ISO-8601 time the settings were created. */
  created_at: string;
  /** ISO-8601 time of the last change. */
  updated_at: string;
  /**
   * ISO-8601 time of the session's last activity (accepted input or ended turn; creation before
   * either), indexed with `session_id` for the session list. Binary collation on PostgreSQL.
   */
  active_at: string;
}

/** Generation counters; kept when settings are deleted (S7). */
export interface GenerationsTable {
  session_id: string;
  generation: number;
}

/** The input inbox (`InputInbox`): one row per accepted input, until it is pruned. */
export interface InboxTable {
  /** The input's id (`IncomingMessage.id`): the primary key that makes `accept` idempotent. */
  id: string;
  session_id: string;
  /**
   * Arrival order across the inbox. PostgreSQL: a `bigserial` (returned as a string); SQLite:
   * taken from `inbox_counter` in the accepting transaction.
   */
  seq: Generated<number | string>;
  /** The input as accepted (`IncomingMessage` with its id), as JSON text. */
  message: string;
  /** ISO-8601 time of acceptance. */
  accepted_at: string;
  /** The turn the input entered, once it did. */
  turn_id: string | null;
  /** The first `Settlement`, as JSON text; null while unsettled. */
  settlement: string | null;
  /** ISO-8601 time of the settlement; null while unsettled (indexed: `unsettled`, `prune`). */
  settled_at: string | null;
}

/**
 * SQLite only: the inbox's sequence. A column that is not the primary key cannot autoincrement
 * in SQLite, and `max(seq) + 1` would hand out a pruned entry's number again.
 */
export interface InboxCounterTable {
  name: string;
  value: number;
}

/** Distributed mode: the newest fence a write of the session carried or a takeover claimed. */
export interface SessionFencesTable {
  session_id: string;
  /** `bigint`: PostgreSQL returns it as a string. */
  fence: number | string;
}

/**
 * Each session's number of conversation messages (control kinds left out), kept by triggers on
 * `messages` (migration `0005_message_counts`) so that `count()` reads one row whatever the
 * session's length. A session without a row has none.
 */
export interface MessageCountsTable {
  session_id: string;
  /** `bigint`: PostgreSQL returns it as a string. */
  n: number | string;
}

/** The database the SQL stores read and write. */
export interface Database {
  messages: MessagesTable;
  sessions: SessionsTable;
  generations: GenerationsTable;
  inbox: InboxTable;
  inbox_counter: InboxCounterTable;
  session_fences: SessionFencesTable;
  message_counts: MessageCountsTable;
}
