import { Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { AGENT_HOOK_METADATA, HookRegistry, type AgentHookMetadata } from '../../hooks';
import {
  PROMPT_CONTRIBUTION_METADATA,
  PromptAssembler,
  type PromptContributionMetadata,
} from '../../prompt';
import { AGENT_TOOL_METADATA, ToolRegistry, type AgentToolMetadata } from '../tools';

/**
 * Finds `@AgentHook`, `@PromptContribution` and `@AgentTool` methods on every provider and
 * controller at start-up (one scan, the way `@nestjs/event-emitter` finds `@OnEvent`) and
 * registers them with the host module as owner; withdraws them all when the application closes.
 */
@Injectable()
export class AgentExplorer implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('AgentExplorer');
  private readonly disposers: (() => void)[] = [];
  private readonly ownerIds = new Map<object, string>();
  private readonly ownerNames = new Map<string, number>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly hooks: HookRegistry,
    private readonly prompts: PromptAssembler,
    private readonly tools: ToolRegistry,
  ) {}

  onModuleInit(): void {
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    for (const wrapper of wrappers) this.explore(wrapper);
  }

  /**
   * Registrations are withdrawn here rather than in `onModuleDestroy`: the shutdown drain
   * (`beforeApplicationShutdown`) still runs hooks of the turns it stops.
   */
  onApplicationShutdown(): void {
    for (const dispose of this.disposers.splice(0)) dispose();
  }

  private explore(wrapper: InstanceWrapper): void {
    const { instance } = wrapper;
    if (!instance || wrapper.isAlias || typeof instance !== 'object') return;
    const prototype = Object.getPrototypeOf(instance);
    if (!prototype) return;
    const methods = this.scanner.getAllMethodNames(prototype);
    const decorated = methods.filter((name) => this.hasAgentMetadata(instance[name]));
    if (!decorated.length) return;
    if (!wrapper.isDependencyTreeStatic()) {
      this.logger.warn(
        `${wrapper.name} is request-scoped: its @AgentHook/@PromptContribution/@AgentTool methods are ignored`,
      );
      return;
    }
    const owner = this.ownerOf(wrapper);
    for (const name of decorated) this.register(instance, name, owner);
  }

  private hasAgentMetadata(method: unknown): boolean {
    if (typeof method !== 'function') return false;
    return [AGENT_HOOK_METADATA, PROMPT_CONTRIBUTION_METADATA, AGENT_TOOL_METADATA].some((key) =>
      Reflect.hasMetadata(key, method),
    );
  }

  private register(instance: any, methodName: string, owner: string): void {
    const method = instance[methodName] as (...args: any[]) => any;
    const bound = method.bind(instance);
    const hooks = this.reflector.get<AgentHookMetadata[]>(AGENT_HOOK_METADATA, method) ?? [];
    for (const { name, priority } of hooks) {
      this.disposers.push(this.hooks.use(name, bound, { owner, priority }));
    }
    const contributions =
      this.reflector.get<PromptContributionMetadata[]>(PROMPT_CONTRIBUTION_METADATA, method) ?? [];
    for (const spec of contributions) {
      this.disposers.push(this.prompts.register({ ...spec, build: bound }, owner));
    }
    const tools = this.reflector.get<AgentToolMetadata[]>(AGENT_TOOL_METADATA, method) ?? [];
    for (const spec of tools) {
      this.disposers.push(this.tools.register({ ...spec, handler: bound }, owner));
    }
  }

  /** Module instance id: the module's class name, numbered when several instances share it. */
  private ownerOf(wrapper: InstanceWrapper): string {
    const host = wrapper.host as object | undefined;
    if (!host) return 'unknown';
    let id = this.ownerIds.get(host);
    if (!id) {
      const name = (host as { name?: string }).name || 'module';
      const seen = this.ownerNames.get(name) ?? 0;
      this.ownerNames.set(name, seen + 1);
      id = seen ? `${name}#${seen + 1}` : name;
      this.ownerIds.set(host, id);
    }
    return id;
  }
}
