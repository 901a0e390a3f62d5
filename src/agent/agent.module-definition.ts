import { ConfigurableModuleBuilder, type DynamicModule, type Provider } from '@nestjs/common';
import type { AgentModuleOptions } from './agent.options';

/** Extras of `AgentModule.forRoot` / `forRootAsync`, next to the options. */
export interface AgentModuleExtras {
  /** Register the module globally. @default false */
  isGlobal?: boolean;
  /**
   * Providers added to the module after its defaults, so they win by token: bind your own
   * port with `{ provide: SessionStore, useClass: MyStore }`.
   */
  providers?: Provider[];
  /**
   * `forRootAsync` only: the options factory returns `distribution`, so the module wires its
   * wake queue and worker through `@nestjs/bullmq` (a module's imports are chosen before its
   * factory runs). `forRoot` sees the options, and wires them when `distribution` is set.
   * @default false
   */
  distributed?: boolean;
}

export const {
  ConfigurableModuleClass: AgentConfigurableModule,
  MODULE_OPTIONS_TOKEN: AGENT_MODULE_OPTIONS,
  OPTIONS_TYPE: AGENT_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: AGENT_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<AgentModuleOptions>({ moduleName: 'Agent' })
  .setClassMethodName('forRoot')
  .setExtras<AgentModuleExtras>(
    { isGlobal: false, providers: [], distributed: false },
    (definition, extras) => {
      const wired = isDistributed(extras) ? distributedDefinition(definition) : definition;
      return {
        ...wired,
        global: extras.isGlobal,
        providers: [...(wired.providers ?? []), ...(extras.providers ?? [])],
      };
    },
  )
  .build();

/**
 * Whether the module is distributed: the `distributed` extra, or, for `forRoot` (whose extras
 * the builder hands over merged with the options), the `distribution` option itself.
 */
function isDistributed(extras: AgentModuleExtras & Pick<AgentModuleOptions, 'distribution'>) {
  return extras.distributed === true || extras.distribution !== undefined;
}

/**
 * The definition with distributed mode's wiring (`agent.module-distributed.ts`, which brings in
 * `@nestjs/bullmq` and `bullmq`: a module without distribution never loads them). Required only
 * now, also because that file imports what imports this one.
 */
function distributedDefinition(definition: DynamicModule): DynamicModule {
  type Wiring = typeof import('./agent.module-distributed');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const wiring = require('./agent.module-distributed') as Wiring;
  return wiring.withDistribution(definition, AGENT_MODULE_OPTIONS);
}

/** Injection token of the validated options with defaults applied. */
export const AGENT_OPTIONS = Symbol.for('agent:resolved_options');
