import type { ConnectionOptions } from 'bullmq';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import type { SessionLanesFactory } from '../../contracts';
import type {
  DistributionRuntime,
  DistributionSetup,
  SocketAdapter,
} from '../distribution-options';
import { DistributedDispatcher } from './distributed.dispatcher';
import { InstanceMailbox } from './instance-mailbox';
import { InstanceRegistry } from './instance-registry';
import { PendingInputs } from './pending-inputs';
import { wakeOrphanedSessions, type UnsettledSource } from './orphan-wakes';
import { RedisEventRelay } from './redis-event-relay';
import { RedisHealth } from './redis-health';
import { checkRedisSettings } from './redis-settings';
import { RemoteView } from './remote-view';
import { SessionLeases } from './session-leases';
import type { WakeQueue } from './wake-queue';

/** How long a control request to another instance may take (ms): a few renewals of a lease. */
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * BullMQ's connection options from a `redis://` URL (BullMQ takes no URL itself): the wake
 * queue's and worker's, given to `BullModule.forRootAsync('agent', ...)` (`bull-wiring.ts`).
 */
export function connectionOf(url: string): ConnectionOptions {
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
export async function connectChecked(
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

const relayLogger = new Logger('AgentEvents');

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
 * Builds one instance's distribution (see `startDistribution`) on the setup's checked Redis
 * client for commands (the mailbox adds its blocking reader): the leases with their fencing, the
 * instance registry, the pending lists and the dispatcher, which adds wake jobs through `wake`
 * (the queue `@nestjs/bullmq` registered); the wake worker is `WakeProcessor`.
 */
export async function createRuntime(
  setup: DistributionSetup,
  createLanes: SessionLanesFactory,
  wake: WakeQueue,
): Promise<DistributionRuntime> {
  const { options, redis, version } = setup;
  const { instanceId, prefix, leaseMs, concurrency, runWhereReceived } = options;
  const owner: { dispatcher?: DistributedDispatcher } = {};
  const leases = new SessionLeases(redis, {
    prefix,
    instanceId,
    leaseMs,
    onLost: (grant) => owner.dispatcher?.leaseLost(grant), // made later, so looked up late
  });
  options.fencing.bind(leases);
  const mailbox = new InstanceMailbox(redis, { prefix, instanceId });
  const health = healthOfConnections(redis, mailbox);
  const registry = registryOf(redis, prefix, instanceId, leaseMs);
  const direct = new DirectRuns();
  const dispatcher = new DistributedDispatcher(createLanes, {
    instanceId,
    leases,
    fencing: options.fencing,
    fences: options.stores.fences,
    pending: new PendingInputs(redis, prefix),
    wake,
    mailbox,
    registry,
    ...{ requestTimeoutMs: REQUEST_TIMEOUT_MS, leaseMs, concurrency, runWhereReceived },
    directRuns: (count) => direct.changed(count),
    inbox: options.stores.inbox,
    remote: new RemoteView(redis, { prefix, instanceId }),
    health,
  });
  owner.dispatcher = dispatcher;
  await dispatcher.start();
  const eventRelay = await startedRelay(redis, prefix, instanceId);
  health.onReconnect(
    () => void sweep({ leases, dispatcher, wake, inbox: options.stores.inbox, leaseMs }),
  );
  return {
    dispatcher,
    instanceId,
    runWake: (sessionId) => dispatcher.runWake(sessionId),
    onDirectRuns: (listener) => direct.listen(listener),
    setTakeover: (takeover) => dispatcher.setTakeover(takeover),
    reachable: () => health.reachable,
    redisHealth: () => health.probe(),
    socketAdapter: () => socketAdapterOf(redis, version, prefix),
    eventRelay,
    viewChanged: (sessionId) => dispatcher.viewChanged(sessionId),
    // The wake worker stopped before (`WakeWorker.stop`); the queue closes after, with Nest.
    async close() {
      health.stop();
      await eventRelay.close();
      await dispatcher.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** Who is told how many sessions taken where their input came run here (the wake worker). */
class DirectRuns {
  private readonly listeners: Array<(count: number) => void> = [];
  listen(listener: (count: number) => void): void {
    this.listeners.push(listener);
  }
  changed(count: number): void {
    for (const listener of this.listeners) listener(count);
  }
}

/** The instance's heartbeat: every third of a lease; gone after a lease without one. */
function registryOf(redis: Redis, prefix: string, instanceId: string, leaseMs: number) {
  const beatEveryMs = Math.max(100, Math.floor(leaseMs / 3));
  return new InstanceRegistry(redis, { prefix, instanceId, beatEveryMs, goneAfterMs: leaseMs });
}

/** The events clients follow, relayed between instances (subscribed once started). */
async function startedRelay(redis: Redis, prefix: string, instanceId: string) {
  const relay = new RedisEventRelay(redis, {
    prefix,
    instanceId,
    warn: (message) => relayLogger.warn(message),
  });
  await relay.start();
  return relay;
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
    // Nobody carries these inputs: the next grant must take the session over (read the inbox).
    wake: (sessionId, delayMs) =>
      leases.forgetCleanRelease(sessionId).then(() => wake.wake(sessionId, delayMs)),
    delayMs: leaseMs,
  });
}
