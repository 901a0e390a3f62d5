import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { StoreUnavailableError } from '../../contracts';
import type { RedisReachability } from '../distribution-health';

/**
 * Distributed mode could not reach Redis, so the input, or the control call, was not carried
 * out: "Redis is unreachable: the input was not accepted". A `StoreUnavailableError` (store
 * `'redis'`), so callers that already handle an unavailable store (a `503` with `Retry-After`,
 * an input dropped as `store-unavailable`) handle this one too. An expected condition, not a
 * bug: it carries no stack, only its message and the client's error as `cause`.
 */
export class RedisUnavailableError extends StoreUnavailableError {
  constructor(
    /** What was not done, e.g. `'the input was not accepted'`. */
    readonly consequence: string,
    options?: { cause?: unknown },
  ) {
    super('redis', consequence, options);
    this.message = `Redis is unreachable: ${consequence}`;
    this.stack = `${this.name}: ${this.message}`;
  }
}

/**
 * Whether an ioredis error means the server was not reached (connection closed, refused,
 * not writeable, retries used up) rather than a reply of a server that was (a `ReplyError`,
 * e.g. a script error): only the first is an outage.
 */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === 'ReplyError') return false;
  if (error.name === 'MaxRetriesPerRequestError') return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true;
  return /Connection is closed|Stream isn't writeable|connect|ECONN|socket|timed out/i.test(
    error.message,
  );
}

/** A Redis connection the health follows, by name (`commands`, `mailbox reader`, ...). */
export interface WatchedConnection {
  name: string;
  /** The client, or a function giving it (a reader made when the mailbox starts). */
  client: Redis | (() => Redis | undefined);
}

/** Options of {@link RedisHealth}. */
export interface RedisHealthOptions {
  /** How often the command connection is PINGed (ms). @default 1000 */
  pingEveryMs?: number;
  /** How long a PING may take before Redis counts as unreachable (ms). @default 1000 */
  pingTimeoutMs?: number;
}

/**
 * Whether this instance reaches its Redis, known without a round trip: each watched connection's
 * ioredis `status` (a stopped server closes the connections at once), plus a PING every second
 * bounded to one (a server that hangs keeps its connections open but answers nothing). Inputs
 * and control calls ask it first (`guard`), so that during an outage they fail at once with a
 * `RedisUnavailableError` instead of waiting for a connection; `/health` reports it.
 */
export class RedisHealth {
  private readonly commands: Redis;
  private pingFailure: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pinging = false;

  constructor(
    private readonly connections: readonly WatchedConnection[],
    private readonly options: RedisHealthOptions = {},
  ) {
    const first = connections[0]?.client;
    if (!first || typeof first === 'function') {
      throw new Error('RedisHealth: the first connection is the command client itself');
    }
    this.commands = first;
    // A connection that is ready again has answered its ready check: the PING's verdict is old.
    this.commands.on('ready', () => (this.pingFailure = undefined));
  }

  /** Calls `listener` each time the command connection is ready again after losing Redis. */
  onReconnect(listener: () => void): void {
    this.commands.on('ready', listener);
  }

  /** Starts the periodic PING (unref'd; idempotent). */
  start(): void {
    this.timer ??= setInterval(() => void this.ping(), this.options.pingEveryMs ?? 1000);
    this.timer.unref();
  }

  /** Stops the periodic PING. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Each connection's state, and whether Redis is reachable now. */
  report(): RedisReachability {
    const connections: Record<string, string> = {};
    const notReady: string[] = [];
    for (const { name, client } of this.connections) {
      const status = (typeof client === 'function' ? client() : client)?.status ?? 'none';
      connections[name] = status;
      if (status !== 'ready') notReady.push(`${name} ${status}`);
    }
    const why = [...notReady, ...(this.pingFailure ? [this.pingFailure] : [])];
    if (!why.length) return { reachable: true, connections };
    return { reachable: false, connections, message: `Redis is unreachable (${why.join('; ')})` };
  }

  /**
   * Whether commands reach Redis now: the command connection is ready and the last PING
   * answered (what inputs and control calls need; `report` also names the other connections).
   */
  get reachable(): boolean {
    return this.commands.status === 'ready' && this.pingFailure === undefined;
  }

  /**
   * Runs a Redis operation unless Redis is known unreachable: then, or when the operation fails
   * for want of a connection, rejects with `RedisUnavailableError(consequence)`. Other errors
   * (a reply of a server that was reached) pass unchanged.
   */
  async guard<T>(consequence: string, operation: () => Promise<T>): Promise<T> {
    if (!this.reachable) throw new RedisUnavailableError(consequence);
    try {
      return await operation();
    } catch (error) {
      if (error instanceof RedisUnavailableError) throw error;
      if (isConnectionError(error) || !this.reachable) {
        throw new RedisUnavailableError(consequence, { cause: error });
      }
      throw error;
    }
  }

  /** `report` after one bounded PING: a server that hangs is found within a second. */
  async probe(): Promise<RedisReachability> {
    await this.ping();
    return this.report();
  }

  /** One bounded PING (skipped while one is still out). */
  async ping(): Promise<void> {
    if (this.pinging || this.commands.status !== 'ready') return;
    this.pinging = true;
    const timeoutMs = this.options.pingTimeoutMs ?? 1000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.commands.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`PING timed out after ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      this.pingFailure = undefined;
    } catch (error) {
      this.pingFailure = (error as Error).message;
    } finally {
      clearTimeout(timer);
      this.pinging = false;
    }
  }
}

/** How often a component's connection errors are logged during an outage (ms). */
const OUTAGE_WARNING_EVERY_MS = 10_000;

/**
 * A listener for the `error` events of a client that reconnects by itself (BullMQ's worker and
 * queue): one warning line, without stack, at most every 10 s, instead of one per attempt.
 */
export function outageWarning(context: string): (error: Error) => void {
  const logger = new Logger(context);
  let last = -Infinity;
  return (error) => {
    if (Date.now() - last < OUTAGE_WARNING_EVERY_MS) return;
    last = Date.now();
    logger.warn(`Redis connection error (${error.message}); reconnecting`);
  };
}
