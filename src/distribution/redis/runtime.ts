import { DelayedError, Queue, Worker, type ConnectionOptions } from 'bullmq';
import Redis from 'ioredis';
import type { SessionLanesFactory } from '../../contracts';
import type {
  DistributionRuntime,
  ResolvedDistributionOptions,
  SocketAdapter,
} from '../distribution-options';
import { DistributedDispatcher } from './distributed.dispatcher';
import { InstanceMailbox } from './instance-mailbox';
import { InstanceRegistry } from './instance-registry';
import { PendingInputs } from './pending-inputs';
import { wakeOrphanedSessions, type UnsettledSource } from './orphan-wakes';
import { outageWarning, RedisHealth } from './redis-health';
import { checkRedisSettings } from './redis-settings';
import { RemoteView } from './remote-view';
import { SessionLeases } from './session-leases';
import { WAKE_QUEUE, WakeQueue, type WakeJob } from './wake-queue';

/** How long a control request to another instance may take (ms): a few renewals of a lease. */
const REQUEST_TIMEOUT_MS = 10_000;

/** BullMQ's connection options from a `redis://` URL (BullMQ takes no URL itself). */
function connectionOf(url: string): ConnectionOptions {
  const parsed = new URL(url);
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    db: Number(parsed.pathname.slice(1) || 0),
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
    // BullMQ's own backoff grows to 20 s: after an outage the wake worker would idle that long.
    retryStrategy: (times: number) => Math.min(500 * times, 2000),
  };
}

/** A Redis client, connected, of a server whose settings pass `checkRedisSettings`. */
async function connectChecked(
  url: string,
  warn: (message: string) => void,
): Promise<{ redis: Redis; version: string }> {
  // No offline queue: while Redis is away a command fails at once (the callers retry or report
  // `RedisUnavailableError`) instead of waiting for a reconnection. Reconnects every 2 s at most.
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    enableOfflineQueue: false,
    connectTimeout: 3000,
    retryStrategy: (times) => Math.min(100 * times, 2000),
  });
  try {
    await redis.connect();
    const report = await checkRedisSettings(redis);
    for (const warning of report.warnings) warn(warning);
    return { redis, version: report.version };
  } catch (error) {
    redis.disconnect();
    throw error;
  }
}

/** The Socket.IO Redis adapter over two connections of its own (see `socketAdapter`). */
function socketAdapterOf(redis: Redis, version: string, prefix: string): SocketAdapter {
  // Loaded only when a gateway asks for it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const io = require('@socket.io/redis-adapter') as typeof import('@socket.io/redis-adapter');
  const pub = redis.duplicate({ enableOfflineQueue: true });
  const sub = redis.duplicate({ enableOfflineQueue: true });
  const channel = `${prefix}:socket.io`;
  const adapter =
    Number(version.split('.')[0]) >= 7
      ? io.createShardedAdapter(pub, sub, { channelPrefix: channel })
      : io.createAdapter(pub, sub, { key: channel });
  return {
    adapter,
    close: async () => {
      await Promise.all([pub, sub].map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}

/**
 * Builds one instance's distribution (see `startDistribution`): one Redis client for commands
 * (the mailbox adds its blocking reader), the leases with their fencing, the instance registry,
 * the pending lists, the wake queue and, once `startWorker` runs, the wake worker.
 */
export async function createRuntime(
  options: ResolvedDistributionOptions,
  createLanes: SessionLanesFactory,
  warn: (message: string) => void,
): Promise<DistributionRuntime> {
  const { instanceId, prefix, leaseMs, concurrency } = options;
  const { redis, version } = await connectChecked(options.redis, warn);
  const connection = connectionOf(options.redis);
  // The leases report losses to the dispatcher, which is made with them: looked up late.
  const owner: { dispatcher?: DistributedDispatcher } = {};
  const leases = new SessionLeases(redis, {
    prefix,
    instanceId,
    leaseMs,
    onLost: (grant) => owner.dispatcher?.leaseLost(grant),
  });
  options.fencing.bind(leases);
  const queue = new Queue<WakeJob>(WAKE_QUEUE, { connection, prefix });
  queue.on('error', outageWarning('WakeQueue'));
  const mailbox = new InstanceMailbox(redis, { prefix, instanceId });
  const wake = new WakeQueue(queue);
  const health = healthOfConnections(redis, mailbox);
  const registry = new InstanceRegistry(redis, {
    prefix,
    instanceId,
    beatEveryMs: Math.max(100, Math.floor(leaseMs / 3)),
    goneAfterMs: leaseMs,
  });
  const dispatcher = new DistributedDispatcher(createLanes, {
    instanceId,
    leases,
    fencing: options.fencing,
    fences: options.stores.fences,
    pending: new PendingInputs(redis, prefix),
    wake,
    mailbox,
    registry,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    leaseMs,
    inbox: options.stores.inbox,
    remote: new RemoteView(redis, { prefix, instanceId }),
    health,
  });
  owner.dispatcher = dispatcher;
  await dispatcher.start();
  const orphans = { leases, dispatcher, wake, inbox: options.stores.inbox, leaseMs };
  health.onReconnect(() => void sweep(orphans));
  const runtime = runtimeOf(dispatcher, { connection, prefix, concurrency, leaseMs }, async () => {
    health.stop();
    await queue.close();
    await redis.quit().catch(() => redis.disconnect());
  });
  return {
    ...runtime,
    reachable: () => health.reachable,
    redisHealth: () => health.probe(),
    socketAdapter: () => socketAdapterOf(redis, version, prefix),
    viewChanged: (sessionId) => dispatcher.viewChanged(sessionId),
  };
}

/** The runtime around a started dispatcher: the wake worker, and the order things close in. */
function runtimeOf(
  dispatcher: DistributedDispatcher,
  worker: { connection: ConnectionOptions; prefix: string; concurrency: number; leaseMs: number },
  closeConnections: () => Promise<void>,
): Omit<DistributionRuntime, 'socketAdapter' | 'viewChanged' | 'redisHealth' | 'reachable'> {
  const { connection, prefix, concurrency, leaseMs } = worker;
  let running: Worker<WakeJob> | undefined;
  return {
    dispatcher,
    instanceId: dispatcher.instanceId,
    setTakeover: (takeover) => dispatcher.setTakeover(takeover),
    workerState: () => (running ? (running.isRunning() ? 'running' : 'stopped') : 'not started'),
    async startWorker() {
      // It reconnects by itself; unheard, BullMQ would print each connection error with a stack.
      running ??= new Worker<WakeJob>(
        WAKE_QUEUE,
        async (job, token) => {
          if ((await dispatcher.runWake(job.data.sessionId)) !== 'held-elsewhere') return;
          // Another instance holds the session: live, it takes the inputs itself; dead, its
          // lease runs out. Either way the job comes back once the lease could have expired.
          await job.moveToDelayed(Date.now() + leaseMs, token);
          throw new DelayedError();
        },
        // A holder that died stops renewing its job's lock: its job is delivered again after
        // a lease, to an instance that takes the session over.
        { connection, prefix, concurrency, lockDuration: leaseMs, stalledInterval: leaseMs },
      ).on('error', outageWarning('WakeWorker'));
      await running.waitUntilReady();
    },
    async stopWorker() {
      await running?.close(true);
    },
    async close() {
      await running?.close(true);
      await dispatcher.close();
      await closeConnections();
    },
  };
}

/**
 * What `/health` follows, PINGing from now on: the command connection and the mailbox reader
 * (`none` until the mailbox starts).
 */
function healthOfConnections(redis: Redis, mailbox: InstanceMailbox): RedisHealth {
  const health = new RedisHealth([
    { name: 'commands', client: redis },
    { name: 'mailbox reader', client: () => mailbox.connection },
  ]);
  health.start();
  return health;
}

/**
 * Redis is back: sessions with unsettled inputs that nobody holds are woken, a lease later
 * (`wakeOrphanedSessions`); a Redis restarted empty lost their pending lists and wake jobs.
 */
function sweep(parts: {
  leases: SessionLeases;
  dispatcher: DistributedDispatcher;
  wake: WakeQueue;
  inbox: Partial<UnsettledSource>;
  leaseMs: number;
}): Promise<string[]> | undefined {
  const { leases, dispatcher, wake, inbox, leaseMs } = parts;
  if (!inbox.unsettled) return undefined;
  const { view, instanceId } = dispatcher;
  return wakeOrphanedSessions({
    inbox: inbox as UnsettledSource,
    holder: (sessionId) => leases.holder(sessionId),
    busyHere: (id) => view.runningTurn(id) !== undefined || view.holder?.(id) === instanceId,
    wake: (sessionId, delayMs) => wake.wake(sessionId, delayMs),
    delayMs: leaseMs,
  });
}
