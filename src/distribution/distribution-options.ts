import { hostname } from 'node:os';
import { AgentError, type WorkDispatcher, type SessionLanesFactory } from '../contracts';
import type Redis from 'ioredis';
import type { FenceStore, RunOutcome, SessionTakeover } from './redis/held-sessions';
import type { WakeQueue } from './redis/wake-queue';
import type { SettlementSource } from './redis/settlement-waiters';
import type { UnsettledSource } from './redis/orphan-wakes';
import type { RedisReachability } from './distribution-health';
import { LeaseFencing } from './redis/lease-fencing';
import type { EventRelay } from './event-relay';

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
   * @default the stores the `inputInbox` option was made with by `createSqlStores`
   */
  stores?: DistributionStores;
  /** This instance's name in leases and logs. @default `<host name>:<pid>` */
  instanceId?: string;
  /** A session lease's time to live (ms), renewed every third of it. @default 10000 */
  leaseMs?: number;
  /** Sessions this instance runs at once (the wake worker's concurrency). @default 64 */
  concurrency?: number;
  /** Prefix of the Redis keys and of the BullMQ queue. @default 'agent' */
  prefix?: string;
  /**
   * Whether an input for an idle session is run by the instance that received it, when fewer
   * than `concurrency` sessions run there: its lease is taken in the round trip that queues the
   * input, and no wake job is added. `false`: every idle-to-busy transition goes through a wake
   * job, taken by whichever instance's worker is free. @default true
   */
  runWhereReceived?: boolean;
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
    return fail(
      'distribution.stores (or the inputInbox option, when made by createSqlStores) must be PostgreSQL stores: distributed mode keeps its durable record in PostgreSQL (AGENT_DB=postgres://...), a SQLite file cannot be shared by several instances',
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
  const instanceId = options.instanceId?.trim() || `${hostname()}:${process.pid}`;
  if (/[\r\n]/.test(instanceId)) fail('distribution.instanceId must be one line');
  const runWhereReceived = options.runWhereReceived ?? true;
  if (typeof runWhereReceived !== 'boolean')
    fail('distribution.runWhereReceived must be a boolean');
  const prefix = options.prefix ?? 'agent';
  if (!/^[\w.-]+$/.test(prefix)) fail('distribution.prefix must be letters, digits, _ . or -');
  return {
    redis: options.redis,
    stores,
    fencing: stores.fencing as LeaseFencing,
    instanceId,
    leaseMs: whole('leaseMs', options.leaseMs, 10_000, 300),
    concurrency: whole('concurrency', options.concurrency, 64, 1),
    prefix,
    runWhereReceived,
  };
}

/** A Socket.IO adapter constructor (`io.adapter(...)`) and how to close its connections. */
export interface SocketAdapter {
  adapter: unknown;
  close(): Promise<void>;
}

/**
 * One instance's distribution before it runs: the options validated, and the Redis command
 * connection made and its settings checked. Made once per application (the queue's
 * configuration and the runtime both start from it).
 */
export interface DistributionSetup {
  readonly options: ResolvedDistributionOptions;
  /** The checked command connection, which the runtime takes over (and closes). */
  readonly redis: Redis;
  /** `redis_version` of the server. */
  readonly version: string;
}

/** One instance's distribution, running: its dispatcher, and how to stop it. */
export interface DistributionRuntime {
  readonly dispatcher: WorkDispatcher;
  readonly instanceId: string;
  /** The wake job of a session (the wake worker's processor calls it). */
  runWake(sessionId: string): Promise<RunOutcome>;
  /**
   * Calls `listener` with the number of sessions this instance runs that it took where their
   * input came (no wake job), whenever it changes: the worker takes that many fewer jobs.
   */
  onDirectRuns(listener: (count: number) => void): void;
  /** Provides the engine's takeover of a session (`InputRecovery.takeOver`). */
  setTakeover(takeover: SessionTakeover): void;
  /**
   * A Socket.IO adapter over this Redis (`@socket.io/redis-adapter`, sharded pub/sub on Redis 7,
   * plain pub/sub before), so that what one instance emits to a room reaches the clients of every
   * instance; with its own two connections, closed by `close`.
   */
  socketAdapter(): SocketAdapter;
  /** The events clients follow, between instances, and the turns' logs for resuming clients. */
  readonly eventRelay: EventRelay;
  /** Whether Redis is reachable now, as last seen (no round trip). */
  reachable(): boolean;
  /** Whether this instance reaches Redis: its connections' states after one bounded PING. */
  redisHealth(): Promise<RedisReachability>;
  /** A session's turn or waiting list changed here: the other instances' views are told. */
  viewChanged(sessionId: string): void;
  /**
   * Stops the mailbox, the leases and the command connection. The wake worker is stopped before
   * (`WakeWorker.stop`), and the wake queue is closed after, by `@nestjs/bullmq`.
   */
  close(): Promise<void>;
}

/**
 * Validates the distribution options and connects this instance's Redis, checked (`noeviction`,
 * version; a warning without persistence). Loads ioredis only now, so that the in-process mode
 * never loads it.
 *
 * @throws DistributionOptionsError when `options` is missing or invalid.
 * @throws RedisSettingsError when the Redis would lose work.
 */
export async function connectDistribution(
  options: DistributionOptions | undefined,
  warn: (message: string) => void,
): Promise<DistributionSetup> {
  if (!options) {
    throw new DistributionOptionsError(
      'AgentModule with distributed: true: the options (forRoot) or the options factory (forRootAsync) must give distribution',
    );
  }
  const resolved = resolveDistribution(options);
  const { connectChecked } = await import('./redis/runtime');
  return { options: resolved, ...(await connectChecked(resolved.redis, warn)) };
}

/**
 * Builds one instance's `DistributedDispatcher` over the engine's lanes and starts it (mailbox,
 * leases, registry), on the setup's connection and the wake queue registered through
 * `@nestjs/bullmq` (`wakeWiring`).
 */
export async function startDistribution(
  setup: DistributionSetup,
  lanes: SessionLanesFactory,
  wake: WakeQueue,
): Promise<DistributionRuntime> {
  const { createRuntime } = await import('./redis/runtime');
  return createRuntime(setup, lanes, wake);
}
