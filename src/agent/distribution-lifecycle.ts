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
  startDistribution,
  WAKE_WORKER,
  type DistributionHealth,
  type WakeWorkerState,
  type DistributionRuntime,
  type DistributionSetup,
  type EventRelay,
  type SocketAdapter,
  type WakeQueue,
  type WakeWorker,
} from '../distribution';
import type { SessionLanesFactory } from '../contracts';
import { AgentEventBus } from './agent-event.bus';
import { InputRecovery } from './input-recovery';

/** Injection token of the running distribution (`null` in-process). @internal */
export const DISTRIBUTION_RUNTIME = Symbol.for('agent:distribution_runtime');

/**
 * Starts distributed mode (a distributed `AgentModule` provides it, see
 * `agent.module-distributed.ts`): the dispatcher over the setup's Redis and the wake queue.
 */
export function distributionRuntime(
  setup: DistributionSetup,
  lanes: SessionLanesFactory,
  wake: WakeQueue,
): Promise<DistributionRuntime> {
  const logger = new Logger('Distribution');
  const resolved = setup.options;
  return startDistribution(setup, lanes, wake).then((runtime) => {
    logger.log(
      `Distributed mode: instance ${resolved.instanceId}, lease ${resolved.leaseMs} ms, ${resolved.concurrency} sessions at once, prefix ${resolved.prefix}`,
    );
    logger.log(
      'agent:* events (EventEmitter) are emitted by the instance that runs a session; Socket.IO clients get them on every instance (README, "Distributed mode")',
    );
    return runtime;
  });
}

/**
 * Distributed mode's place in the application, and what the API asks of it (the instance id,
 * the Socket.IO adapter): the wake worker (`WAKE_WORKER`, the `@nestjs/bullmq` processor) takes
 * jobs once the application is up (recovery done), stops taking them when shutdown begins (a
 * session it runs is then drained, S9, and its job delivered again elsewhere), and the
 * connections close last (the wake queue after them, with `@nestjs/bullmq`'s module).
 */
@Injectable()
export class AgentDistribution
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  private readonly unsubscribe: Array<() => void> = [];
  private workerStarted = false;

  constructor(
    @Optional() @Inject(DISTRIBUTION_RUNTIME) private readonly runtime: DistributionRuntime | null,
    @Optional() @Inject(WAKE_WORKER) private readonly worker: WakeWorker | null,
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
    await this.worker?.start();
    this.workerStarted = true;
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.worker?.stop();
  }

  /** The wake worker: not started before the application is up, then running or stopped. */
  private workerState(): WakeWorkerState {
    if (!this.workerStarted) return 'not started';
    return this.worker?.isRunning() ? 'running' : 'stopped';
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
      .then((redis) => distributionHealthOf(runtime.instanceId, redis, this.workerState()));
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

  /**
   * Distributed mode: the events clients follow, carried between instances, and the kept streams
   * of turns for clients that resume on another instance. `undefined` in one process.
   */
  eventRelay(): EventRelay | undefined {
    return this.runtime?.eventRelay;
  }
}
