export * from './mcp.config';
export { mcpToolName } from './mcp-names';
export { McpToolError, mcpResult } from './mcp-results';
export type { McpServerState } from './mcp-connection';
export { McpServers, type McpServerStatus } from './mcp-servers';
