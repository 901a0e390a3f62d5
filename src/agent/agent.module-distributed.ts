import { Logger, Module, type DynamicModule, type InjectionToken } from '@nestjs/common';
import { SessionLanesFactory, type SessionLanesFactory as LanesFactory } from '../contracts';
import {
  connectDistribution,
  wakeWiring,
  type DistributionOptions,
  type DistributionSetup,
  type WakeQueue,
  type WakeWiring,
} from '../distribution';
import { sqlStoresOf } from '../session-bridge';
import type { AgentModuleOptions } from './agent.options';
import { DISTRIBUTION_RUNTIME, distributionRuntime } from './distribution-lifecycle';

/**
 * The `distribution` option with its `stores`: given, or else the stores the agent's inbox was
 * made with (`createSqlStores`), so `distribution: { redis }` is enough when the ports are bound
 * to fenced PostgreSQL stores.
 */
function withStores(options: AgentModuleOptions): DistributionOptions | undefined {
  const { distribution } = options;
  if (!distribution || distribution.stores) return distribution;
  const stores = sqlStoresOf(options.inputInbox);
  return stores ? { ...distribution, stores } : distribution;
}

/** Injection token of the application's `DistributionSetup` (made once). @internal */
export const DISTRIBUTION_SETUP = Symbol.for('agent:distribution_setup');

/**
 * Holds a distributed `AgentModule`'s options (the host's `useValue`, `useFactory` or
 * `useClass`, with the host's `imports`) and the `DistributionSetup` made from them, for the
 * agent and for the agent's `BullModule.forRootAsync` both: one module imported by the two, so
 * the host's factory runs once and Redis is connected and checked once.
 */
@Module({})
export class AgentDistributionSetupModule {}

/**
 * `AgentModule`'s definition in distributed mode: the options move to an
 * `AgentDistributionSetupModule` (exported from there), and the module imports the agent's
 * `@nestjs/bullmq` wiring of the wake queue and worker (`wakeWiring`), and provides the runtime
 * over them.
 */
export function withDistribution(
  definition: DynamicModule,
  optionsToken: InjectionToken,
): DynamicModule {
  const hostImports = definition.imports ?? [];
  const setupModule: DynamicModule = {
    module: AgentDistributionSetupModule,
    imports: hostImports,
    providers: [
      ...(definition.providers ?? []),
      {
        provide: DISTRIBUTION_SETUP,
        useFactory: (options: AgentModuleOptions) =>
          connectDistribution(withStores(options), (warning) =>
            new Logger('Distribution').warn(warning),
          ),
        inject: [optionsToken],
      },
    ],
    exports: [optionsToken, DISTRIBUTION_SETUP],
  };
  const wake: WakeWiring = wakeWiring({
    setupModule,
    setup: DISTRIBUTION_SETUP,
    runtime: DISTRIBUTION_RUNTIME,
  });
  return {
    ...definition,
    // The host's imports stay the module's too: its `providers` extra may inject from them.
    imports: [...hostImports, setupModule, ...wake.imports],
    providers: [
      ...wake.providers,
      {
        provide: DISTRIBUTION_RUNTIME,
        useFactory: (setup: DistributionSetup, lanes: LanesFactory, queue: WakeQueue) =>
          distributionRuntime(setup, lanes, queue),
        inject: [DISTRIBUTION_SETUP, SessionLanesFactory, wake.queue],
      },
    ],
  };
}
