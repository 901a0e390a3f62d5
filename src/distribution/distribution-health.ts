/** Whether an instance reaches Redis, as its runtime sees it (`RedisHealth.report`). */
export interface RedisReachability {
  /** The connections are ready and the last PING answered in time. */
  reachable: boolean;
  /** ioredis `status` by connection name (`commands`, `mailbox reader`). */
  connections: Record<string, string>;
  /** Why it is unreachable, in plain words. */
  message?: string;
}

/** The wake worker: `not started` before the application is up, `stopped` at shutdown. */
export type WakeWorkerState = 'not started' | 'running' | 'stopped';

/**
 * Distributed mode's health (`/health`'s `queue` part): up while this instance reaches Redis
 * (every connection `ready`, a PING answered within a second) and its wake worker runs.
 */
export interface DistributionHealth {
  up: boolean;
  instanceId: string;
  redis: 'reachable' | 'unreachable';
  /** ioredis `status` of each connection (`commands`, `mailbox reader`). */
  connections: Record<string, string>;
  worker: WakeWorkerState;
  /** Why it is down, in plain words. */
  message?: string;
}

/** The health of an instance from its Redis reachability and its wake worker's state. */
export function distributionHealthOf(
  instanceId: string,
  redis: RedisReachability,
  worker: WakeWorkerState,
): DistributionHealth {
  const stopped = worker === 'stopped' ? 'the wake worker is not running' : undefined;
  const why = [redis.message, stopped].filter((part) => part !== undefined);
  return {
    up: redis.reachable && worker !== 'stopped',
    instanceId,
    redis: redis.reachable ? 'reachable' : 'unreachable',
    connections: redis.connections,
    worker,
    ...(why.length ? { message: why.join('; ') } : {}),
  };
}
