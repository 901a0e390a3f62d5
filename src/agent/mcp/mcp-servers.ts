import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ToolCallContext } from '../../contracts';
import { AGENT_OPTIONS } from '../agent.module-definition';
import type { ResolvedAgentOptions } from '../agent.options';
import { ToolRegistry } from '../tools';
import { McpConnection, type McpServerState, type McpTimings } from './mcp-connection';
import { mcpInputSchema, mcpNeedsApproval, mcpToolName } from './mcp-names';
import { mcpResult } from './mcp-results';
import type { McpServerConfig } from './mcp.config';

/** One server's state as `/health` lists it. */
export interface McpServerStatus {
  name: string;
  state: McpServerState;
  /** Tools of the server in the registry. */
  tools: number;
  /** Why the last attempt or the connection failed, while it is not ready. */
  lastError?: string;
}

/** Default timings; `mcpConnectTimeoutMs` overrides the first. */
export const MCP_TIMINGS: McpTimings = {
  connectTimeoutMs: 10_000,
  backoffMs: 500,
  maxBackoffMs: 30_000,
  pingIntervalMs: 15_000,
};

interface Registered {
  /** The server's own name of the tool. */
  tool: string;
  /** Description and schema, to see a change. */
  key: string;
  dispose: () => void;
}

/**
 * The MCP servers of the `mcpServers` option (issue 20): each one's tools are in the
 * `ToolRegistry` as `<server>__<tool>` (owner `mcp:<server>`), so hooks, call ids, persistence,
 * abort and timeouts work for them as for any tool. Start-up waits for each server at most its
 * connect timeout, then carries on (the server is retried in the background); the clients close
 * and child processes end when the application shuts down, after the drain.
 */
@Injectable()
export class McpServers implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('McpServers');
  private readonly connections = new Map<string, McpConnection>();
  private readonly registered = new Map<string, Map<string, Registered>>();
  private readonly listeners = new Set<() => void>();

  constructor(
    @Inject(AGENT_OPTIONS) private readonly options: ResolvedAgentOptions,
    private readonly tools: ToolRegistry,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const servers = Object.entries(this.options.mcpServers);
    const timings = { ...MCP_TIMINGS, connectTimeoutMs: this.options.mcpConnectTimeoutMs };
    for (const [name, config] of servers) {
      const connection = new McpConnection(
        name,
        config,
        timings,
        {
          tools: (tools) => this.sync(name, config, tools),
          changed: () => this.notify(),
        },
        this.logger,
      );
      this.connections.set(name, connection);
    }
    await Promise.all([...this.connections.values()].map((c) => c.start()));
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([...this.connections.values()].map((c) => c.close()));
    for (const name of this.connections.keys()) this.tools.removeOwner(`mcp:${name}`);
    this.connections.clear();
  }

  /** Each configured server's state, tool count and last error. */
  status(): McpServerStatus[] {
    return [...this.connections.values()].map((c) => ({
      name: c.name,
      state: c.state,
      tools: this.registered.get(c.name)?.size ?? 0,
      ...(c.lastError ? { lastError: c.lastError } : {}),
    }));
  }

  /** Calls `listener` after any server's state or tools changed; returns a function that stops it. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  /** Brings the registry in line with a server's tool list: gone tools out, new or changed in. */
  private sync(server: string, config: McpServerConfig, tools: Tool[]): void {
    const mine = this.registered.get(server) ?? new Map<string, Registered>();
    this.registered.set(server, mine);
    const next = new Map<string, Tool>();
    for (const tool of tools) {
      const name = mcpToolName(server, tool.name);
      if (next.has(name)) {
        this.logger.warn(`MCP server "${server}": tool "${tool.name}" skipped, "${name}" is taken`);
      } else next.set(name, tool);
    }
    for (const [name, entry] of mine) {
      const tool = next.get(name);
      if (tool && keyOf(tool) === entry.key) continue;
      entry.dispose();
      mine.delete(name);
    }
    for (const [name, tool] of next) {
      if (mine.has(name)) continue;
      try {
        const dispose = this.tools.register(
          this.specOf(server, config, name, tool),
          `mcp:${server}`,
        );
        mine.set(name, { tool: tool.name, key: keyOf(tool), dispose });
      } catch (error) {
        this.logger.warn(`MCP server "${server}": tool "${tool.name}" skipped: ${String(error)}`);
      }
    }
    this.notify();
  }

  private specOf(server: string, config: McpServerConfig, name: string, tool: Tool) {
    const connection = () => this.connections.get(server)!;
    const timeoutMs = this.options.toolTimeoutMs;
    return {
      name,
      description: tool.description ?? tool.title ?? `${tool.name} (MCP server ${server})`,
      parameters: mcpInputSchema(tool.inputSchema),
      timeoutMs,
      needsApproval: mcpNeedsApproval(config.needsApproval, tool.name),
      handler: async (args: unknown, context: ToolCallContext) =>
        mcpResult(
          await connection().call(tool.name, args, context.signal, timeoutMs),
          context.acceptsImages,
        ),
    };
  }
}

const keyOf = (tool: Tool) =>
  JSON.stringify([tool.description ?? tool.title ?? '', tool.inputSchema]);
