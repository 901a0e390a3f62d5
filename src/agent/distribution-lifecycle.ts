import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import {
  distributionHealthOf,
  RedisUnavailableError,
  resolveDistribution,
  startDistribution,
  type DistributionHealth,
  type DistributionRuntime,
  type SocketAdapter,
} from '../distribution';
import type { SessionLanesFactory } from '../contracts';
import type { AgentModuleOptions } from './agent.options';
import { AgentEventBus } from './agent-event.bus';
import { InputRecovery } from './input-recovery';

/** Injection token of the running distribution (`null` in-process). @internal */
export const DISTRIBUTION_RUNTIME = Symbol.for('agent:distribution_runtime');

/** Starts distributed mode when the options ask for it (`distribution`); `null` otherwise. */
export function distributionRuntime(
  options: AgentModuleOptions,
  lanes: SessionLanesFactory,
): Promise<DistributionRuntime | null> {
  if (!options.distribution) return Promise.resolve(null);
  const logger = new Logger('Distribution');
  const resolved = resolveDistribution(options.distribution);
  return startDistribution(resolved, lanes, (warning) => logger.warn(warning)).then((runtime) => {
    logger.log(
      `Distributed mode: instance ${resolved.instanceId}, lease ${resolved.leaseMs} ms, ${resolved.concurrency} sessions at once, prefix ${resolved.prefix}`,
    );
    logger.warn(
      'Distributed mode is not complete in this version: agent:* events are emitted on the holder only (README, "Distributed mode")',
    );
    return runtime;
  });
}

/**
 * Distributed mode's place in the application, and what the API asks of it (the instance id,
 * the Socket.IO adapter): the wake worker the wake worker takes jobs once the
 * application is up (recovery done), stops taking them when shutdown begins (a session it runs
 * is then drained, S9, and its job delivered again elsewhere), and the connections close last.
 */
@Injectable()
export class AgentDistribution
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly unsubscribe: Array<() => void> = [];

  constructor(
    @Optional() @Inject(DISTRIBUTION_RUNTIME) private readonly runtime: DistributionRuntime | null,
    private readonly recovery: InputRecovery,
    private readonly events: AgentEventBus,
  ) {}

  onModuleInit(): void {
    const runtime = this.runtime;
    if (!runtime) return;
    // The other instances' views follow this one's turns and waiting lists.
    const changed = ({ sessionId }: { sessionId: string }) => runtime.viewChanged(sessionId);
    for (const name of ['agent:turn:start', 'agent:turn:end', 'agent:queue'] as const) {
      this.unsubscribe.push(this.events.on(name, changed));
    }
    // A session taken over from a dead instance: its interrupted turns closed, its inputs resumed.
    runtime.setTakeover((sessionId, onTheirWay, settledAfterMs) =>
      this.recovery.takeOver(sessionId, onTheirWay, settledAfterMs),
    );
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.runtime?.startWorker();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.runtime?.stopWorker();
  }

  async onApplicationShutdown(): Promise<void> {
    for (const off of this.unsubscribe.splice(0)) off();
    await this.runtime?.close();
  }

  /** This instance's id in distributed mode; `undefined` in one process. */
  get instanceId(): string | undefined {
    return this.runtime?.instanceId;
  }

  /**
   * Distributed mode: whether this instance reaches Redis (every connection ready, a PING
   * answered within a second) and runs its wake worker, for `/health`. `undefined` in one process.
   */
  health(): Promise<DistributionHealth | undefined> {
    const runtime = this.runtime;
    if (!runtime) return Promise.resolve(undefined);
    return runtime
      .redisHealth()
      .then((redis) => distributionHealthOf(runtime.instanceId, redis, runtime.workerState()));
  }

  /**
   * Distributed mode with Redis unreachable: throws `RedisUnavailableError` ("Redis is
   * unreachable: the input was not accepted"), so that a caller refuses an input before it is
   * recorded (the API answers `503` with `Retry-After`). Does nothing in one process.
   */
  assertAccepting(): void {
    if (this.runtime && !this.runtime.reachable()) {
      throw new RedisUnavailableError('the input was not accepted');
    }
  }

  /**
   * Distributed mode: a Socket.IO adapter over the deployment's Redis, so that a room's events
   * reach the clients of every instance (`AgentIoAdapter` installs it). `undefined` in one process.
   */
  socketAdapter(): SocketAdapter | undefined {
    return this.runtime?.socketAdapter();
  }
}
