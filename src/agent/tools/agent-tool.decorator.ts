import { extendArrayMetadata } from '@nestjs/common/utils/extend-metadata.util';
import type { ToolCallContext, ToolDefinition, ToolSpec } from '../../contracts';

/** Metadata key of `@AgentTool`. */
export const AGENT_TOOL_METADATA = 'agent:tool_metadata';

/** What `@AgentTool` records: the tool's definition (the method is its handler). */
export interface AgentToolMetadata extends ToolDefinition {
  /** Milliseconds before a call is abandoned with a timeout result. @default 60000 */
  timeoutMs?: number;
  /**
   * Ask a person before each call (issue 20; README, "Human approval before a tool runs"):
   * `true`, or a function of the call's arguments and context. @default false
   */
  needsApproval?: ToolSpec['needsApproval'];
}

type ToolMethod = (args: any, context: ToolCallContext) => unknown;

/**
 * Declares a provider method as a tool the model may call. Arguments are validated against
 * `parameters` (JSON Schema) before the method runs; it gets `(args, ToolCallContext)`.
 */
export function AgentTool(
  spec: AgentToolMetadata,
): <T extends ToolMethod>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => TypedPropertyDescriptor<T> {
  return (_target, _key, descriptor) => {
    extendArrayMetadata(
      AGENT_TOOL_METADATA,
      [spec],
      descriptor.value as unknown as (...args: unknown[]) => unknown,
    );
    return descriptor;
  };
}
AgentTool.KEY = AGENT_TOOL_METADATA;
