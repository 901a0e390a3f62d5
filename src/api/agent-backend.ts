import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { AgentDistribution, AgentInstrumentation, AgentService, McpServers } from '../agent';
import { HistoryStore, type HistoryStore as HistoryStorePort } from '../contracts';
import { ModelRegistry } from '../llm';

/** The application has no `AgentModule` for `AgentApiModule` to serve. */
export class AgentModuleMissingError extends Error {
  constructor(token: string) {
    super(
      `AgentApiModule found no ${token}: import AgentModule.forRoot(...) or forRootAsync(...) in the application`,
    );
    this.name = 'AgentModuleMissingError';
  }
}

/**
 * The agent's providers as the API module reaches them: looked up in the whole application
 * (`ModuleRef`, not strict) on first use, so `AgentModule` may be imported anywhere in the
 * host, global or not, and the API module imposes nothing on it. First use is at a request,
 * a socket event or a lifecycle hook, when every provider of the application exists.
 */
@Injectable()
export class AgentBackend {
  private readonly found = new Map<unknown, unknown>();

  constructor(private readonly moduleRef: ModuleRef) {}

  /** The agent (`AgentService`). */
  get service(): AgentService {
    return this.resolve<AgentService>(AgentService, 'AgentService');
  }

  /** The history store the agent uses. */
  get history(): HistoryStorePort {
    return this.resolve<HistoryStorePort>(HistoryStore, 'HistoryStore');
  }

  /** The model providers. */
  get models(): ModelRegistry {
    return this.resolve<ModelRegistry>(ModelRegistry, 'ModelRegistry');
  }

  /** The MCP tool servers of the agent; `undefined` for an agent module without them. */
  get mcp(): McpServers | undefined {
    try {
      return this.resolve<McpServers>(McpServers, 'McpServers');
    } catch {
      return undefined;
    }
  }

  /** The instrumentation seam. */
  get instrumentation(): AgentInstrumentation {
    return this.resolve<AgentInstrumentation>(AgentInstrumentation, 'AgentInstrumentation');
  }

  /**
   * Distributed mode's side of the agent (its Redis health, whether it accepts inputs now);
   * `undefined` for an agent module without it.
   */
  get distribution(): AgentDistribution | undefined {
    try {
      return this.resolve<AgentDistribution>(AgentDistribution, 'AgentDistribution');
    } catch {
      return undefined;
    }
  }

  private resolve<T>(token: unknown, name: string): T {
    if (this.found.has(token)) return this.found.get(token) as T;
    let value: T;
    try {
      value = this.moduleRef.get<string, T>(token as string, { strict: false });
    } catch {
      throw new AgentModuleMissingError(name);
    }
    this.found.set(token, value);
    return value;
  }
}
