import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { MailboxClosedError } from './mailbox-errors';
import {
  type Answer,
  type Letter,
  type MailboxEnvelope,
  type WireMessage,
  appendEntry,
  decodeEntry,
  messageOf,
} from './mailbox-wire';
import { PendingRequests } from './pending-requests';
import { RedisKeys } from './redis-keys';

export { MailboxClosedError, MailboxRequestError, MailboxTimeoutError } from './mailbox-errors';
export type { MailboxEnvelope } from './mailbox-wire';

/** Where a mailbox lives and how it reads and writes its stream. */
export interface InstanceMailboxOptions {
  /** The key prefix of the deployment (`RedisKeys`). */
  prefix: string;
  /** This instance's id: its mailbox is `<prefix>:mailbox:<instanceId>`. */
  instanceId: string;
  /** XREAD BLOCK, in ms (default 5000). */
  blockMs?: number;
  /** XADD MAXLEN ~ of the target stream (default 10000). */
  maxLen?: number;
  /** PEXPIRE of the target stream on every XADD, so a dead instance's mailbox goes (default 24 h). */
  ttlMs?: number;
}

/** Handles one message type; a request's answer is the returned (or resolved) value. */
export type MailboxHandler = (envelope: MailboxEnvelope) => unknown; // a value, or its promise

const READ_COUNT = 100;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 2000;

/**
 * One mailbox per instance, on a Redis stream: messages and requests to other instances, and a
 * read loop over its own on a dedicated connection (`<prefix>:mailbox-reader:<instanceId>`) that
 * calls each entry's handler synchronously in arrival order without awaiting it (a slow handler
 * never holds up answers to our requests) and deletes what it dispatched (XDEL): delivery is at
 * most once. A read error (Redis restart) is retried from the last id seen, after 100 ms to 2 s.
 */
export class InstanceMailbox {
  private readonly logger = new Logger('Mailbox');
  private readonly keys: RedisKeys;
  private readonly key: string;
  private readonly handlers = new Map<string, MailboxHandler>();
  private readonly pending = new PendingRequests();
  private readonly unknownTypes = new Set<string>();
  private state: 'new' | 'starting' | 'started' | 'closed' = 'new';
  private reader?: Redis;
  private lastId = '0-0';
  private loopDone: Promise<void> = Promise.resolve();
  private closing?: Promise<void>;
  private wake?: () => void;

  /**
   * @param redis the shared command client (not closed by the mailbox)
   * @param options prefix, instance id, and the stream's tuning
   */
  constructor(
    private readonly redis: Redis,
    private readonly options: InstanceMailboxOptions,
  ) {
    this.keys = new RedisKeys(options.prefix);
    this.key = this.keys.mailbox(options.instanceId);
  }

  /** The CLIENT SETNAME of the dedicated reading connection. */
  get readerName(): string {
    return `${this.options.prefix}:mailbox-reader:${this.options.instanceId}`;
  }

  /** The reading connection, once started (`/health` reports its `status`). */
  get connection(): Redis | undefined {
    return this.reader;
  }
  /**
   * Registers the handler of a message type (one per type; a second registration throws naming
   * the type). A request's answer is the handler's return value, or its error's message.
   */
  on(type: string, handler: MailboxHandler): void {
    if (this.handlers.has(type)) {
      throw new Error(`Mailbox of '${this.options.instanceId}': type '${type}' has a handler`);
    }
    this.handlers.set(type, handler);
  }

  /**
   * Starts the read loop from the stream's current end (what was sent before is not for this
   * instance). Resolves once that position is fixed: every message sent afterwards is read.
   */
  async start(): Promise<void> {
    if (this.state !== 'new') {
      throw new Error(`Mailbox of '${this.options.instanceId}' is ${this.state}: start() once`);
    }
    this.state = 'starting';
    // Resending keeps the XREAD in flight over a reconnect; without it, it would never settle.
    const reader = this.redis.duplicate({
      connectionName: this.readerName,
      autoResendUnfulfilledCommands: true,
      enableOfflineQueue: true, // unlike the command client's: a read waits for Redis
    });
    reader.on('error', (err: Error) => this.logger.warn(`Reader connection: ${err.message}`));
    this.reader = reader;
    try {
      const last = await reader.xrevrange(this.key, '+', '-', 'COUNT', 1);
      this.lastId = last[0]?.[0] ?? '0-0';
    } catch (err) {
      if (this.isClosed()) return;
      this.state = 'new';
      reader.disconnect();
      throw err;
    }
    if (this.isClosed()) return;
    this.state = 'started';
    this.loopDone = this.loop(reader);
  }

  /**
   * Fire-and-forget message to an instance's mailbox (XADD MAXLEN ~ and PEXPIRE in one MULTI).
   * Resolves with the entry id once Redis stored it.
   */
  async send(to: string, type: string, body: unknown): Promise<string> {
    this.assertOpen('send');
    return this.post(to, { from: this.options.instanceId, type, body });
  }

  /**
   * A request: sends with a fresh correlation id and resolves with the receiver handler's
   * return value. Rejects with `MailboxRequestError` when the receiver answered with an error,
   * `MailboxTimeoutError` when no answer came within `timeoutMs`, `MailboxClosedError` when
   * this mailbox closed first. Needs `start()`: the answer comes through this mailbox.
   */
  async request<R = unknown>(
    to: string,
    type: string,
    body: unknown,
    timeoutMs: number,
  ): Promise<R> {
    this.assertOpen('request');
    if (this.state !== 'started') {
      throw new Error(`Mailbox of '${this.options.instanceId}': start() before request()`);
    }
    const correlationId = randomUUID();
    const answer = this.pending.add<R>(correlationId, to, type, timeoutMs);
    this.post(to, { from: this.options.instanceId, type, body, replyTo: correlationId }).catch(
      (err: unknown) => this.pending.fail(correlationId, new Error(messageOf(err))),
    );
    return answer;
  }

  /**
   * Stops reading, rejects pending requests with `MailboxClosedError`, disconnects the
   * dedicated connection and waits for the loop to end; idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.state = 'closed';
    const self = this.options.instanceId;
    this.pending.rejectAll((to, type) => new MailboxClosedError(self, to, type));
    this.wake?.();
    this.reader?.disconnect();
    await this.loopDone;
  }

  /** Reads until closed; never throws, never spins (errors wait a growing backoff). */
  private async loop(reader: Redis): Promise<void> {
    const blockMs = this.options.blockMs ?? 5000;
    let backoff = BACKOFF_MIN_MS;
    while (!this.isClosed()) {
      try {
        const streams = await reader.xread(
          ...(['COUNT', READ_COUNT, 'BLOCK', blockMs, 'STREAMS'] as const),
          this.key,
          this.lastId,
        );
        backoff = BACKOFF_MIN_MS;
        if (streams) this.dispatchBatch(streams[0][1]);
      } catch (err) {
        if (this.isClosed()) break;
        this.logger.warn(
          `Read of '${this.key}' failed (${messageOf(err)}); retry in ${backoff} ms`,
        );
        await this.pause(backoff);
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    }
  }

  /** Dispatches the entries in order, then deletes them from the stream. */
  private dispatchBatch(entries: [id: string, fields: string[]][]): void {
    const done: string[] = [];
    for (const [id, fields] of entries) {
      if (this.isClosed()) break;
      this.lastId = id;
      done.push(id);
      const envelope = decodeEntry(id, fields);
      if (envelope) this.dispatch(envelope);
      else this.logger.warn(`Malformed entry ${id} on '${this.key}' ignored`);
    }
    if (!done.length) return;
    this.redis.xdel(this.key, ...done).catch((err: unknown) => {
      this.logger.warn(`XDEL on '${this.key}' failed: ${messageOf(err)}`);
    });
  }

  private dispatch(envelope: MailboxEnvelope): void {
    if (envelope.inReplyTo !== undefined) {
      return this.pending.settle(envelope.inReplyTo, envelope.body);
    }
    const handler = this.handlers.get(envelope.type);
    if (handler) {
      void this.run(handler, envelope);
      return;
    }
    if (!this.unknownTypes.has(envelope.type)) {
      this.unknownTypes.add(envelope.type);
      this.logger.warn(`No handler for type '${envelope.type}' (from '${envelope.from}'): ignored`);
    }
    if (envelope.replyTo !== undefined) {
      const error = `Instance '${this.options.instanceId}' has no handler for '${envelope.type}'`;
      void this.answer(envelope, { ok: false, error });
    }
  }

  /** Calls the handler at once (an async function runs synchronously up to its first await). */
  private async run(handler: MailboxHandler, envelope: MailboxEnvelope): Promise<void> {
    let answer: Answer;
    try {
      answer = { ok: true, value: await handler(envelope) };
    } catch (err) {
      const error = messageOf(err);
      this.logger.error(`Handler of '${envelope.type}' from '${envelope.from}' failed: ${error}`);
      answer = { ok: false, error };
    }
    if (envelope.replyTo !== undefined) await this.answer(envelope, answer);
  }

  /** Sends a request's answer back to its sender; a value JSON cannot carry becomes an error. */
  private async answer(request: MailboxEnvelope, answer: Answer): Promise<void> {
    const { from, type, replyTo } = request;
    const self = this.options.instanceId;
    const reply = (body: Answer): WireMessage => ({ from: self, type, body, inReplyTo: replyTo });
    try {
      await this.post(from, reply(answer)).catch((err: unknown) => {
        if (!(err instanceof TypeError)) throw err; // JSON.stringify: BigInt, cycles
        return this.post(from, reply({ ok: false, error: `Answer not JSON: ${err.message}` }));
      });
    } catch (err) {
      this.logger.error(`Answer to '${type}' for '${from}' failed: ${messageOf(err)}`);
    }
  }

  /** A message to whichever instance a script finds (`PendingInputs.push` pokes the holder). */
  letter(type: string, body: unknown): Letter {
    const data = JSON.stringify({ from: this.options.instanceId, type, body });
    return { head: this.keys.mailbox(''), data, ...this.limits() };
  }

  private post(to: string, message: WireMessage): Promise<string> {
    return appendEntry(this.redis, this.keys.mailbox(to), JSON.stringify(message), this.limits());
  }

  private limits(): { maxLen: number; ttlMs: number } {
    return { maxLen: this.options.maxLen ?? 10_000, ttlMs: this.options.ttlMs ?? 86_400_000 };
  }

  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private assertOpen(what: string): void {
    if (this.isClosed()) {
      throw new Error(`Mailbox of '${this.options.instanceId}' is closed: no ${what}`);
    }
  }

  /** Waits `ms`, or less if close() wakes it. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
