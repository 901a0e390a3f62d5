import { BullModule } from '@nestjs/bullmq';
import type { DynamicModule, InjectionToken, Provider } from '@nestjs/common';
import type { DistributionRuntime, DistributionSetup } from '../distribution-options';
import { WAKE_WORKER, type WakeWiring } from '../wake-wiring';
import { connectionOf } from './runtime';
import { wakeProcessorFor } from './wake-processor';
import { AGENT_BULL_CONFIG, WAKE_QUEUE, WakeQueue } from './wake-queue';

/**
 * The wake queue and worker through `@nestjs/bullmq` (see `wakeWiring`): the agent's own
 * configuration (`BullModule.forRootAsync('agent')`, the connection and prefix of the
 * distribution, from the module that made the setup once), the queue registered under it and
 * injected with `@InjectQueue` (`WakeQueue`), and the `@Processor` of the queue.
 */
export function createWakeWiring(tokens: {
  setupModule: DynamicModule;
  setup: InjectionToken;
  runtime: InjectionToken;
}): WakeWiring {
  const worker: Provider = {
    provide: WAKE_WORKER,
    useFactory: (setup: DistributionSetup, runtime: DistributionRuntime) =>
      wakeProcessorFor(setup.options, runtime),
    inject: [tokens.setup, tokens.runtime],
  };
  return {
    imports: [
      BullModule.forRootAsync(AGENT_BULL_CONFIG, {
        imports: [tokens.setupModule],
        inject: [tokens.setup],
        useFactory: ({ options }: DistributionSetup) => ({
          connection: connectionOf(options.redis),
          prefix: options.prefix,
        }),
      }),
      BullModule.registerQueue({ configKey: AGENT_BULL_CONFIG, name: WAKE_QUEUE }),
    ],
    providers: [WakeQueue, worker],
    queue: WakeQueue,
  };
}
