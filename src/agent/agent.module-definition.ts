import { ConfigurableModuleBuilder, type Provider } from '@nestjs/common';
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
}

export const {
  ConfigurableModuleClass: AgentConfigurableModule,
  MODULE_OPTIONS_TOKEN: AGENT_MODULE_OPTIONS,
  OPTIONS_TYPE: AGENT_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: AGENT_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<AgentModuleOptions>({ moduleName: 'Agent' })
  .setClassMethodName('forRoot')
  .setExtras<AgentModuleExtras>({ isGlobal: false, providers: [] }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
    providers: [...(definition.providers ?? []), ...(extras.providers ?? [])],
  }))
  .build();

/** Injection token of the validated options with defaults applied. */
export const AGENT_OPTIONS = Symbol.for('agent:resolved_options');
