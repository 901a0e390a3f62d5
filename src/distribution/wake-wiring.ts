import type { DynamicModule, InjectionToken, Provider } from '@nestjs/common';

/** The wake worker (BullMQ, through `@nestjs/bullmq`) as distributed mode's lifecycle drives it. */
export interface WakeWorker {
  /** Starts taking wake jobs (after the application is up). */
  start(): Promise<void>;
  /** Stops taking wake jobs at once; the jobs of sessions it runs are delivered again later. */
  stop(): Promise<void>;
  /** Whether it takes jobs now. */
  isRunning(): boolean;
}

/** Injection token of the wake worker; provided in distributed mode only. */
export const WAKE_WORKER = Symbol.for('agent:wake_worker');

/** What a distributed `AgentModule` adds for its wake queue (see {@link wakeWiring}). */
export interface WakeWiring {
  /** `BullModule.forRootAsync('agent', ...)` and `BullModule.registerQueue(...)` of the queue. */
  imports: DynamicModule[];
  /** The queue's `WakeQueue` and the worker (`WAKE_WORKER`, a `@Processor`). */
  providers: Provider[];
  /** The token of the `WakeQueue` the runtime adds wake jobs through. */
  queue: InjectionToken;
}

/**
 * The wake queue and worker wired the Nest way, through `@nestjs/bullmq`: the queue's
 * configuration is made from the `DistributionSetup` provided (once) by `setupModule` under the
 * token `setup`; the worker calls the runtime provided under `runtime`. Loads `@nestjs/bullmq`
 * and `bullmq` only now, so that a module without distribution never loads them.
 */
export function wakeWiring(tokens: {
  setupModule: DynamicModule;
  setup: InjectionToken;
  runtime: InjectionToken;
}): WakeWiring {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const wiring = require('./redis/bull-wiring') as typeof import('./redis/bull-wiring');
  return wiring.createWakeWiring(tokens);
}
