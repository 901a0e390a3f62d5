import { readFileSync } from 'node:fs';

/**
 * Configuration of MCP tool servers (issue 20): the `mcpServers` option of `AgentModule` and the
 * `{ "mcpServers": { ... } }` file of `AGENT_MCP_CONFIG`, the format Claude Desktop and Cursor
 * users already keep.
 */

/** Which tools of a server ask a person before each call: all (`true`) or those named. */
export type McpApproval = boolean | string[];

/** A server started as a child process, spoken to over its stdin/stdout. */
export interface McpStdioServerConfig {
  command: string;
  args?: string[];
  /** Added to a small safe default environment (`PATH`, `HOME`, ...), not to the whole of ours. */
  env?: Record<string, string>;
  /** Working directory of the process. @default the agent's */
  cwd?: string;
  needsApproval?: McpApproval;
}

/** A server reached over Streamable HTTP. */
export interface McpHttpServerConfig {
  url: string;
  /** Sent with every request (e.g. `Authorization`). */
  headers?: Record<string, string>;
  needsApproval?: McpApproval;
}

/** One MCP server's entry. */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** MCP servers by name; the name prefixes its tools: `<name>__<tool>`. */
export type McpServersConfig = Record<string, McpServerConfig>;

/** Server names: letters, digits, `_` and `-`, at most 32 (tool names have 64 in all). */
export const MCP_SERVER_NAME = /^[a-zA-Z0-9_-]{1,32}$/;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isStringMap = (value: unknown): value is Record<string, string> =>
  isRecord(value) && Object.values(value).every((v) => typeof v === 'string');

function entryProblem(name: string, entry: unknown): string | undefined {
  const at = `mcpServers.${name}`;
  if (!isRecord(entry)) return `${at} must be an object with "command" or "url"`;
  if ('command' in entry === 'url' in entry) return `${at} must have either "command" or "url"`;
  const approval = entry.needsApproval;
  if (
    approval !== undefined &&
    typeof approval !== 'boolean' &&
    !(Array.isArray(approval) && approval.every((t) => typeof t === 'string'))
  ) {
    return `${at}.needsApproval must be true, false or a list of tool names`;
  }
  if ('command' in entry) {
    if (typeof entry.command !== 'string' || !entry.command.trim()) {
      return `${at}.command must be a non-empty string`;
    }
    const { args, env, cwd } = entry;
    if (args !== undefined && !(Array.isArray(args) && args.every((a) => typeof a === 'string'))) {
      return `${at}.args must be a list of strings`;
    }
    if (env !== undefined && !isStringMap(env)) return `${at}.env must map names to strings`;
    if (cwd !== undefined && typeof cwd !== 'string') return `${at}.cwd must be a string`;
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(String(entry.url));
  } catch {
    return `${at}.url must be a URL, got ${JSON.stringify(entry.url)}`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `${at}.url must use http: or https:, got "${url.protocol}"`;
  }
  if (entry.headers !== undefined && !isStringMap(entry.headers)) {
    return `${at}.headers must map names to strings`;
  }
  return undefined;
}

/**
 * What is wrong with an `mcpServers` value (`mcpServers.<name>.<field> must ...`), or
 * `undefined` when it is valid.
 */
export function mcpServersProblem(value: unknown): string | undefined {
  if (!isRecord(value)) return 'mcpServers must be an object of servers by name';
  for (const [name, entry] of Object.entries(value)) {
    if (!MCP_SERVER_NAME.test(name)) {
      return `mcpServers: server name "${name}" must be 1-32 letters, digits, _ or -`;
    }
    const problem = entryProblem(name, entry);
    if (problem) return problem;
  }
  return undefined;
}

/** Whether an entry starts a process (else it is reached over HTTP). */
export function isStdioServer(config: McpServerConfig): config is McpStdioServerConfig {
  return 'command' in config;
}

/**
 * Reads a `{ "mcpServers": { ... } }` file (Claude Desktop's and Cursor's format; other keys are
 * ignored) and validates it; throws an `Error` saying what is wrong with it.
 */
export function readMcpConfigFile(path: string): McpServersConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`cannot read "${path}": ${(error as Error).message}`, { cause: error });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(`"${path}" is not JSON: ${(error as Error).message}`, { cause: error });
  }
  if (!isRecord(parsed) || !('mcpServers' in parsed)) {
    throw new Error(`"${path}" must be an object with "mcpServers"`);
  }
  const problem = mcpServersProblem(parsed.mcpServers);
  if (problem) throw new Error(`"${path}": ${problem}`);
  return parsed.mcpServers as McpServersConfig;
}
