import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { context } from '@opentelemetry/api';
import { DelayedError, type Job } from 'bullmq';
import { contextOf } from '../../contracts';
import type { DistributionRuntime, ResolvedDistributionOptions } from '../distribution-options';
import type { WakeWorker } from '../wake-wiring';
import { outageWarning } from './redis-health';
import { AGENT_BULL_CONFIG, WAKE_QUEUE, type WakeJob } from './wake-queue';

/**
 * The wake worker, as `@nestjs/bullmq` runs processors: its `Worker` is made by `BullExplorer`
 * when the application initialises (over the wake queue's connection and prefix), not started
 * (`autorun: false`): `AgentDistribution` starts it once the application is up and closes it
 * when shutdown begins. Each job runs its session here until it is idle
 * (`DistributionRuntime.runWake`). Provided through {@link wakeProcessorFor}, which gives it the
 * worker options of the application's distribution.
 */
@Processor({ name: WAKE_QUEUE, configKey: AGENT_BULL_CONFIG }, { autorun: false })
export class WakeProcessor extends WorkerHost implements WakeWorker {
  private readonly warn = outageWarning('WakeWorker');

  constructor(
    private readonly runtime: Pick<DistributionRuntime, 'runWake' | 'onDirectRuns'>,
    private readonly leaseMs: number,
    private readonly concurrency = 1,
  ) {
    super();
  }

  /** A wake job: runs the session here, or puts the job off while another instance holds it. */
  async process(job: Job<WakeJob>, token?: string): Promise<void> {
    const { sessionId, traceparent } = job.data;
    const run = () => this.runtime.runWake(sessionId);
    // The run continues the trace of what woke the session (its turns parent to their inputs).
    const ran = await (traceparent ? context.with(contextOf(traceparent), run) : run());
    if (ran === 'busy') {
      // Every slot here runs a session: the job goes back, for any instance, a moment later.
      await job.moveToDelayed(Date.now() + Math.min(this.leaseMs / 10, 1000), token);
      throw new DelayedError();
    }
    if (ran !== 'held-elsewhere') return;
    // Another instance holds the session: live, it takes the inputs itself; dead, its lease
    // runs out. Either way the job comes back once the lease could have expired.
    await job.moveToDelayed(Date.now() + this.leaseMs, token);
    throw new DelayedError();
  }

  /** Starts taking jobs (once); resolves when the worker's connections are ready. */
  async start(): Promise<void> {
    const worker = this.worker;
    // Sessions taken where their input came use slots of the instance's concurrency too.
    this.runtime.onDirectRuns((count) => {
      worker.concurrency = Math.max(1, this.concurrency - count);
    });
    // `run` resolves only when the worker stops; its failure goes where autorun's would.
    if (!worker.isRunning()) worker.run().catch((error: Error) => worker.emit('error', error));
    await worker.waitUntilReady();
  }

  /**
   * Stops taking jobs at once, without waiting for the active ones: the sessions they run are
   * drained by the shutdown (S9) and their jobs, no longer renewed, are delivered again.
   */
  async stop(): Promise<void> {
    await this.worker.close(true);
  }

  /**
   * The worker's connection errors while Redis is away: it reconnects by itself, so one
   * throttled warning line instead of BullMQ's report with a stack per attempt.
   */
  @OnWorkerEvent('error')
  onError(error: Error): void {
    this.warn(error);
  }

  /** Whether the worker takes jobs now. */
  isRunning(): boolean {
    return this.worker.isRunning();
  }
}

/**
 * BullMQ worker options of a distribution: `concurrency` sessions at once; a job's lock lasts a
 * lease (`lockDuration`, renewed every half of it) and the stalled-job check runs every lease
 * (`stalledInterval`), so a holder that died has its job delivered again after about a lease,
 * to an instance that takes the session over.
 */
export function wakeWorkerOptions(options: ResolvedDistributionOptions) {
  const { concurrency, leaseMs } = options;
  return { autorun: false, concurrency, lockDuration: leaseMs, stalledInterval: leaseMs };
}

/**
 * The wake processor of one application. `@nestjs/bullmq` reads a processor's worker options
 * from its class's `@Processor` metadata when it creates the worker, and these options come from
 * the host's (possibly async) options, unknown when the class was declared: so each application
 * gets a subclass carrying its own. `BullExplorer` finds a factory-made processor by its
 * instance's class.
 */
export function wakeProcessorFor(
  options: ResolvedDistributionOptions,
  runtime: Pick<DistributionRuntime, 'runWake' | 'onDirectRuns'>,
): WakeProcessor {
  const Configured = class ConfiguredWakeProcessor extends WakeProcessor {};
  Processor(
    { name: WAKE_QUEUE, configKey: AGENT_BULL_CONFIG },
    wakeWorkerOptions(options),
  )(Configured);
  return new Configured(runtime, options.leaseMs, options.concurrency);
}
