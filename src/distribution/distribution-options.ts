import { hostname } from 'node:os';
import { AgentError, type WorkDispatcher, type SessionLanesFactory } from '../contracts';
import type { FenceStore, SessionTakeover } from './redis/held-sessions';
import type { SettlementSource } from './redis/settlement-waiters';
import type { UnsettledSource } from './redis/orphan-wakes';
import type { RedisReachability, WakeWorkerState } from './distribution-health';
import { LeaseFencing } from './redis/lease-fencing';

/** The SQL stores distributed mode writes through: PostgreSQL, created with a `LeaseFencing`. */
export interface DistributionStores {
  dialect: 'sqlite' | 'postgres';
  fences: FenceStore;
  /**
   * The inbox: where a settlement is found when its message did not come, and, when Redis comes
   * back, which sessions have unsettled inputs (`unsettled`; without it none are woken then).
   */
  inbox: SettlementSource & Partial<UnsettledSource>;
  /** The fencing the stores were created with (`createSqlStores(url, { fencing })`). */
  fencing?: unknown;
}

/**
 * `AgentModule` option `distribution`: several instances share the sessions over Redis (leases,
 * mailboxes, pending inputs), BullMQ (one wake job per idle-to-busy transition) and PostgreSQL
 * (the inbox, history and fences). README, "Distributed mode".
 */
export interface DistributionOptions {
  /** The Redis server: a `redis://` or `rediss://` URL. */
  redis: string;
  /**
   * The PostgreSQL stores the agent's ports are bound to, created with
   * `createSqlStores(url, { fencing: new LeaseFencing() })` so their turn writes are fenced.
   */
  stores: DistributionStores;
  /** This instance's name in leases and logs. @default `<host name>:<pid>` */
  instanceId?: string;
  /** A session lease's time to live (ms), renewed every third of it. @default 10000 */
  leaseMs?: number;
  /** Sessions this instance runs at once (the wake worker's concurrency). @default 64 */
  concurrency?: number;
  /** Prefix of the Redis keys and of the BullMQ queue. @default 'agent' */
  prefix?: string;
}

/** `DistributionOptions` with defaults applied. */
export type ResolvedDistributionOptions = Required<Omit<DistributionOptions, 'stores'>> & {
  stores: DistributionStores;
  fencing: LeaseFencing;
};

/** Distributed mode cannot run as configured; the message is one line naming the setting. */
export class DistributionOptionsError extends AgentError {}

/** Validates `options` and applies the defaults; throws `DistributionOptionsError`. */
export function resolveDistribution(options: DistributionOptions): ResolvedDistributionOptions {
  const fail = (message: string): never => {
    throw new DistributionOptionsError(message);
  };
  if (typeof options.redis !== 'string' || !/^rediss?:\/\//.test(options.redis)) {
    fail('distribution.redis must be a redis:// or rediss:// URL');
  }
  const { stores } = options;
  if (!stores || stores.dialect !== 'postgres') {
    fail(
      'distribution.stores must be PostgreSQL stores: distributed mode keeps its durable record in PostgreSQL (AGENT_DB=postgres://...), a SQLite file cannot be shared by several instances',
    );
  }
  if (!(stores.fencing instanceof LeaseFencing)) {
    fail(
      'distribution.stores must be created with createSqlStores(url, { fencing: new LeaseFencing() }), so that a paused instance cannot write after a takeover',
    );
  }
  const whole = (name: string, value: number | undefined, fallback: number, min: number) => {
    const n = value ?? fallback;
    if (!Number.isSafeInteger(n) || n < min)
      fail(`distribution.${name} must be a whole number of at least ${min}`);
    return n;
  };
  const prefix = options.prefix ?? 'agent';
  if (!/^[\w.-]+$/.test(prefix)) fail('distribution.prefix must be letters, digits, _ . or -');
  return {
    redis: options.redis,
    stores,
    fencing: stores.fencing as LeaseFencing,
    instanceId: options.instanceId?.trim() || `${hostname()}:${process.pid}`,
    leaseMs: whole('leaseMs', options.leaseMs, 10_000, 300),
    concurrency: whole('concurrency', options.concurrency, 64, 1),
    prefix,
  };
}

/** A Socket.IO adapter constructor (`io.adapter(...)`) and how to close its connections. */
export interface SocketAdapter {
  adapter: unknown;
  close(): Promise<void>;
}

/** One instance's distribution, running: its dispatcher, and how to start and stop it. */
export interface DistributionRuntime {
  readonly dispatcher: WorkDispatcher;
  readonly instanceId: string;
  /** Starts taking wake jobs (after the application is up). */
  startWorker(): Promise<void>;
  /** Stops taking wake jobs at once; the jobs of sessions it runs are delivered again later. */
  stopWorker(): Promise<void>;
  /** Provides the engine's takeover of a session (`InputRecovery.takeOver`). */
  setTakeover(takeover: SessionTakeover): void;
  /**
   * A Socket.IO adapter over this Redis (`@socket.io/redis-adapter`, sharded pub/sub on Redis 7,
   * plain pub/sub before), so that what one instance emits to a room reaches the clients of every
   * instance; with its own two connections, closed by `close`.
   */
  socketAdapter(): SocketAdapter;
  /** Whether Redis is reachable now, as last seen (no round trip). */
  reachable(): boolean;
  /** Whether this instance reaches Redis: its connections' states after one bounded PING. */
  redisHealth(): Promise<RedisReachability>;
  /** The wake worker's state (`/health` is down while it is `stopped`). */
  workerState(): WakeWorkerState;
  /** A session's turn or waiting list changed here: the other instances' views are told. */
  viewChanged(sessionId: string): void;
  /** Stops the worker, the mailbox, the leases and the Redis connections. */
  close(): Promise<void>;
}

/**
 * Connects one instance (Redis checked: `noeviction`, version; a warning without persistence)
 * and builds its `DistributedDispatcher` over the engine's lanes. Loads ioredis and BullMQ only
 * now, so that the in-process mode never loads them.
 */
export async function startDistribution(
  options: ResolvedDistributionOptions,
  lanes: SessionLanesFactory,
  warn: (message: string) => void,
): Promise<DistributionRuntime> {
  const { createRuntime } = await import('./redis/runtime');
  return createRuntime(options, lanes, warn);
}
