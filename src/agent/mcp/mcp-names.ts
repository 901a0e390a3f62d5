import { createHash } from 'node:crypto';

/** What a tool name must match (the model APIs' rule, as `ToolRegistry` checks it). */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The registry name of an MCP server's tool: `<server>__<tool>`. Characters outside
 * `[a-zA-Z0-9_-]` (dots, slashes, spaces, ...) become `_`; a name longer than 64 keeps its
 * first 55 characters and gets `_` and 8 hex digits of a hash of the whole original, so that
 * it stays unique. The server's own name of the tool is what the call sends.
 */
export function mcpToolName(server: string, tool: string): string {
  const joined = `${server}__${tool}`;
  if (TOOL_NAME.test(joined)) return joined;
  const safe = joined.replace(/[^a-zA-Z0-9_-]/g, '_');
  if (safe.length <= 64) return safe;
  const hash = createHash('sha256').update(joined).digest('hex').slice(0, 8);
  return `${safe.slice(0, 55)}_${hash}`;
}

/** Whether a tool of a server with this `needsApproval` entry asks a person first. */
export function mcpNeedsApproval(entry: boolean | string[] | undefined, tool: string): boolean {
  return Array.isArray(entry) ? entry.includes(tool) : entry === true;
}

/**
 * A tool's input schema as the registry takes it: without `$schema`. MCP's default dialect is
 * JSON Schema 2020-12, which servers may name; the registry's Ajv speaks draft-07, which reads
 * the schemas tools use (objects, properties, `$defs`, enums) the same way.
 */
export function mcpInputSchema(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}
