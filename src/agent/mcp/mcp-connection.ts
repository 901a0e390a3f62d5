import type { Logger } from '@nestjs/common';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { isStdioServer, type McpServerConfig } from './mcp.config';

/** A server's state as `/health` shows it. */
export type McpServerState = 'connecting' | 'ready' | 'reconnecting' | 'failed';

/** Timings of a connection (milliseconds). */
export interface McpTimings {
  /** Longest wait for a connection with its tool list. @default 10000 */
  connectTimeoutMs: number;
  /** First wait before a new attempt; doubles each failure up to `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Interval of the liveness ping of a ready HTTP server. */
  pingIntervalMs: number;
}

/** What a connection reports to its owner. */
export interface McpConnectionEvents {
  /** The server's current tool list (after a connection and after each list change). */
  tools(tools: Tool[]): void;
  /** The state or the last error changed. */
  changed(): void;
}

const CLIENT_INFO = { name: 'nest-agent-orchestrator', version: '0.1.0' };
const messageOf = (error: unknown) => (error as Error)?.message ?? String(error);

/** Rejects with `message` after `ms` unless `work` settled first. */
function deadline<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * One MCP server: connects (a child process for `command`, Streamable HTTP for `url`), lists its
 * tools and follows `notifications/tools/list_changed`, calls its tools, and when the server
 * dies (the process exits, a request cannot reach it, a ping fails) connects again with
 * exponential backoff, from a fresh client, for as long as the application runs.
 */
export class McpConnection {
  state: McpServerState = 'connecting';
  lastError?: string;
  toolCount = 0;
  private client?: Client;
  /** The client of the attempt in progress. */
  private connecting?: Client;
  private everReady = false;
  private closed = false;
  private failures = 0;
  private retry?: NodeJS.Timeout;
  private ping?: NodeJS.Timeout;
  private stderrTail?: string;
  private readonly closing = new Set<Promise<void>>();

  constructor(
    readonly name: string,
    private readonly config: McpServerConfig,
    private readonly timings: McpTimings,
    private readonly events: McpConnectionEvents,
    private readonly logger: Logger,
  ) {}

  /** Makes the first attempt; resolves when it ended, connected or not (never rejects). */
  start(): Promise<void> {
    return this.connect();
  }

  /** Calls a tool (by the server's own name of it); rejects when the server is unavailable. */
  async call(tool: string, args: unknown, signal: AbortSignal, timeoutMs: number) {
    const client = this.client;
    if (!client || this.state !== 'ready') throw this.unavailable();
    try {
      const result = await client.callTool(
        { name: tool, arguments: (args ?? {}) as Record<string, unknown> },
        undefined,
        { signal, timeout: timeoutMs },
      );
      return result as CallToolResult;
    } catch (error) {
      // An MCP error is the server's answer; anything else is the way to it failing.
      if (error instanceof McpError || signal.aborted) throw error;
      this.lost(client, messageOf(error));
      throw this.unavailable(messageOf(error));
    }
  }

  /** Stops retrying and closes the client (a child process is ended). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.ping);
    const clients = [this.client, this.connecting].filter((c): c is Client => c !== undefined);
    this.client = this.connecting = undefined;
    for (const client of clients) this.dispose(client);
    await Promise.all(this.closing);
  }

  /** Closes a client in the background; `close()` waits for every such close (child exits). */
  private dispose(client: Client): void {
    const closing = client.close().catch(() => undefined);
    this.closing.add(closing);
    void closing.finally(() => this.closing.delete(closing));
  }

  private unavailable(detail?: string): Error {
    const why = this.state === 'reconnecting' ? 'reconnecting' : 'not connected yet, retrying';
    const last = detail ?? this.lastError;
    return new Error(`MCP server "${this.name}" is unavailable (${why})${last ? `: ${last}` : ''}`);
  }

  private transport(): Transport {
    if (!isStdioServer(this.config)) {
      return new StreamableHTTPClientTransport(new URL(this.config.url), {
        requestInit: { headers: this.config.headers ?? {} },
      });
    }
    const { command, args, env, cwd } = this.config;
    const transport = new StdioClientTransport({ command, args, env, cwd, stderr: 'pipe' });
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = chunk.toString().trim().split('\n').filter(Boolean);
      if (lines.length) this.stderrTail = lines[lines.length - 1].slice(0, 300);
      for (const line of lines) this.logger.debug(`[${this.name}] ${line}`);
    });
    return transport;
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    this.stderrTail = undefined;
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    this.connecting = client;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () =>
      this.relist(client).catch((error: unknown) =>
        this.logger.warn(`MCP server "${this.name}": re-listing tools failed: ${messageOf(error)}`),
      ),
    );
    client.onerror = (error) => this.onTransportError(client, error);
    client.onclose = () => this.lost(client, this.exitReason());
    const { connectTimeoutMs } = this.timings;
    try {
      await deadline(
        (async () => {
          await client.connect(this.transport(), { timeout: connectTimeoutMs });
          await this.relist(client);
        })(),
        connectTimeoutMs,
        `no answer within ${connectTimeoutMs} ms`,
      );
    } catch (error) {
      this.connecting = undefined;
      client.onclose = undefined;
      this.dispose(client);
      return this.failed(error);
    }
    this.connecting = undefined;
    if (this.closed) return this.dispose(client);
    this.ready(client);
  }

  private ready(client: Client): void {
    this.client = client;
    this.state = 'ready';
    this.everReady = true;
    this.failures = 0;
    this.lastError = undefined;
    this.logger.log(`MCP server "${this.name}" ready: ${this.toolCount} tool(s)`);
    if (!isStdioServer(this.config)) {
      this.ping = setInterval(() => this.check(client), this.timings.pingIntervalMs);
      this.ping.unref();
    }
    this.events.changed();
  }

  private failed(error: unknown): void {
    const last = this.stderrTail
      ? `${messageOf(error)} (stderr: ${this.stderrTail})`
      : messageOf(error);
    // A server that stays away is reported once per reason, not at every retry.
    const news = last !== this.lastError || this.state === 'connecting';
    this.lastError = last;
    this.state = this.everReady ? 'reconnecting' : 'failed';
    const line = `MCP server "${this.name}" could not connect: ${last}; retrying`;
    if (news) this.logger.warn(line);
    else this.logger.debug(line);
    this.scheduleRetry();
    this.events.changed();
  }

  /** Lists the tools (every page) and hands them to the owner, unless the client is stale. */
  private async relist(client: Client): Promise<void> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    // A server that keeps answering with a cursor gets at most 100 pages read.
    for (let pages = 0; pages === 0 || (cursor && pages < 100); pages++) {
      const page = await client.listTools(cursor ? { cursor } : undefined, {
        timeout: this.timings.connectTimeoutMs,
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    }
    if (this.closed || (client !== this.client && client !== this.connecting)) return;
    this.toolCount = tools.length;
    this.events.tools(tools);
    if (this.client === client) this.events.changed();
  }

  private onTransportError(client: Client, error: Error): void {
    this.logger.debug(`MCP server "${this.name}": ${error.message}`);
    // HTTP: a broken event stream is often the first sign of a server gone; ask it.
    if (this.client === client && !isStdioServer(this.config)) this.check(client);
  }

  private check(client: Client): void {
    client
      .ping({ timeout: this.timings.connectTimeoutMs })
      .catch((error: unknown) => this.lost(client, `ping failed: ${messageOf(error)}`));
  }

  private exitReason(): string {
    const base = isStdioServer(this.config) ? 'the process exited' : 'the connection closed';
    return this.stderrTail ? `${base} (stderr: ${this.stderrTail})` : base;
  }

  /** The ready client stopped working: its tools stay, calls fail clearly, a retry is due. */
  private lost(client: Client, reason: string): void {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    clearInterval(this.ping);
    client.onclose = undefined;
    this.dispose(client);
    this.state = 'reconnecting';
    this.lastError = reason;
    this.logger.warn(`MCP server "${this.name}" lost (${reason}); reconnecting`);
    this.scheduleRetry();
    this.events.changed();
  }

  private scheduleRetry(): void {
    if (this.closed) return;
    const { backoffMs, maxBackoffMs } = this.timings;
    const delay = Math.min(maxBackoffMs, backoffMs * 2 ** this.failures++);
    // Full jitter in the upper half: servers restarted together do not retry in step.
    this.retry = setTimeout(() => void this.connect(), delay * (0.5 + Math.random() / 2));
    this.retry.unref();
  }
}
