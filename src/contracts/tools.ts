import type { Actor } from './messages';

/** A JSON Schema object (draft 2020-12 / draft-07 subset that Ajv understands). */
export type JsonSchema = Record<string, unknown>;

/** A tool as offered to the model. */
export interface ToolDefinition {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: JsonSchema;
}

/** What a tool handler knows about the call (contract T1, T2, H2, H5). */
export interface ToolCallContext {
  sessionId: string;
  turnId: string;
  /** The agent's id of this call (I8), independent of the provider's tool-call id. */
  callId: string;
  /** Identity the tool acts for: the input's `actor` first, else its user (H5). */
  userId?: string;
  platform?: string;
  actor?: Actor;
  source?: string;
  /** Whether the turn's model can see images (H2). */
  acceptsImages: boolean;
  /** Aborted when the turn is stopped (S3). */
  signal: AbortSignal;
}

/** A tool's implementation. Its return value is sent to the model (objects as JSON). */
export type ToolHandler<A = any> = (args: A, context: ToolCallContext) => unknown;

/** A tool registered with the `ToolRegistry`. */
export interface ToolSpec<A = any> extends ToolDefinition {
  handler: ToolHandler<A>;
  /** Milliseconds before the call is abandoned with a timeout result. @default 60000 */
  timeoutMs?: number;
  /** Ask a person before each call (issue 20): `true`, or a function of the call's arguments. @default false */
  needsApproval?: boolean | ((args: any, context: ToolCallContext) => boolean | Promise<boolean>);
}
