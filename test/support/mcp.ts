import { readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import type { McpServers, McpServerState, McpServerStatus, ToolCallContext } from '../../src';

/** The stdio fixture server (run with `node`). */
export const MCP_FIXTURE = join(__dirname, '..', 'fixtures', 'mcp', 'fixture-server.js');

/** A tool-call context for `ToolRegistry.execute` outside a turn. */
export function callContext(overrides: Partial<ToolCallContext> = {}): ToolCallContext {
  return {
    sessionId: 's',
    turnId: 't',
    callId: 'c',
    acceptsImages: false,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** Resolves once `check` returns something, re-checked whenever the MCP servers change. */
export function whenMcp<T>(mcp: McpServers, check: () => T | undefined): Promise<T> {
  return new Promise((resolve) => {
    const test = () => {
      const value = check();
      if (value === undefined) return;
      stop();
      resolve(value);
    };
    const stop = mcp.onChange(test);
    test();
  });
}

/** Resolves with a server's status once it is in `state`. */
export function whenState(
  mcp: McpServers,
  name: string,
  state: McpServerState,
): Promise<McpServerStatus> {
  return whenMcp(mcp, () => mcp.status().find((s) => s.name === name && s.state === state));
}

/** Resolves once the (existing) file has a line that starts with `prefix`. */
export function whenLine(file: string, prefix: string): Promise<string> {
  return new Promise((resolve) => {
    const watcher = watch(file, () => check());
    const check = () => {
      const line = readFileSync(file, 'utf8')
        .split('\n')
        .find((l) => l.startsWith(prefix));
      if (line === undefined) return;
      watcher.close();
      resolve(line);
    };
    check();
  });
}
