import type Redis from 'ioredis';

/**
 * The stream side of `InstanceMailbox`: an entry carries one field, `m`, the message as JSON
 * (sender, type, body, correlation ids); the entry id is the envelope's id.
 */

/** One message read from a mailbox. */
export interface MailboxEnvelope<T = unknown> {
  /** The stream entry id. */
  id: string;
  /** The sender instance. */
  from: string;
  /** The message type, which picks the handler. */
  type: string;
  /** The JSON-serialisable payload. */
  body: T;
  /** Set on a request: its correlation id, which the answer carries back as `inReplyTo`. */
  replyTo?: string;
  /** Set on an answer: the correlation id of the request it answers. */
  inReplyTo?: string;
}

/** The entry's only field. */
export const MESSAGE_FIELD = 'm';

/** A message as stored in the entry's field, before it gets its entry id. */
export interface WireMessage {
  from: string;
  type: string;
  body?: unknown;
  replyTo?: string;
  inReplyTo?: string;
}

/**
 * A message ready for a script to post to an instance's mailbox: the stream key is `head` and
 * the instance id, the entry's field `data`, with the stream's limits (see `appendEntry`).
 */
export interface Letter {
  head: string;
  data: string;
  maxLen: number;
  ttlMs: number;
}

/** The body of an answer to a request: the handler's value, or its error's message. */
export type Answer = { ok: true; value?: unknown } | { ok: false; error: string };

/** The envelope of a stream entry, or `undefined` when the entry is not a mailbox message. */
export function decodeEntry(id: string, fields: string[]): MailboxEnvelope | undefined {
  const at = fields.findIndex((field, i) => i % 2 === 0 && field === MESSAGE_FIELD);
  if (at < 0) return undefined;
  try {
    const wire = JSON.parse(fields[at + 1] ?? '') as Partial<WireMessage> | null;
    if (typeof wire?.from !== 'string' || typeof wire.type !== 'string') return undefined;
    return { ...wire, id, from: wire.from, type: wire.type, body: wire.body };
  } catch {
    return undefined;
  }
}

/** XADD (MAXLEN ~) and PEXPIRE of one stream in one MULTI; resolves with the entry id. */
export async function appendEntry(
  redis: Redis,
  key: string,
  data: string,
  limits: { maxLen: number; ttlMs: number },
): Promise<string> {
  const results = await redis
    .multi()
    .xadd(key, 'MAXLEN', '~', limits.maxLen, '*', MESSAGE_FIELD, data)
    .pexpire(key, limits.ttlMs)
    .exec();
  if (!results) throw new Error(`XADD to '${key}' aborted`);
  const failed = results.find(([err]) => err)?.[0];
  if (failed) throw failed;
  return results[0][1] as string;
}

/** The message of an error, or the thrown value as text. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
