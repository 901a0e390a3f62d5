import { Injectable } from '@nestjs/common';
import Ajv, { type ValidateFunction } from 'ajv';
import {
  isThenable,
  type JsonSchema,
  type ToolCallContext,
  type ToolDefinition,
  type ToolSpec,
} from '../../contracts';

/** The outcome of one tool call; `content` is what the model receives. */
export interface ToolResult {
  ok: boolean;
  content: string;
  /**
   * Images of the result (data or http(s) URLs) that the model sees after the call's results,
   * in the same turn, when it accepts images (H2); history keeps `content` only.
   */
  images?: string[];
}

/**
 * What a handler may return to give the model images next to its text: `text` is the result,
 * `images` (data or http(s) URLs) are shown to a model that accepts images after the results.
 */
export class ToolOutput {
  constructor(
    readonly text: string,
    readonly images: readonly string[] = [],
  ) {}
}

interface RegisteredTool {
  spec: ToolSpec;
  validate: ValidateFunction;
  owner: string;
  /** What the model is offered, made once (frozen: token counts are cached per definition). */
  definition: ToolDefinition;
}

const DEFAULT_TIMEOUT_MS = 60_000;

/** An error result in the shape the model receives: `{"error": "..."}`. */
export function toolError(message: string): ToolResult {
  return { ok: false, content: JSON.stringify({ error: message }) };
}

/**
 * Tools the model may call. `execute` never throws: unknown tools, invalid arguments, handler
 * errors, timeouts and aborts come back as error results the model can read.
 */
@Injectable()
export class ToolRegistry {
  private readonly tools = new Map<string, RegisteredTool>();
  private readonly ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false });

  /** Registers a tool; returns a function that removes it. Throws on a duplicate name. */
  register<A = any>(spec: ToolSpec<A>, owner = 'runtime'): () => void {
    if (!/^[a-zA-Z0-9_-]{1,64}$/.test(spec.name)) {
      throw new Error(`Tool name "${spec.name}" must match ^[a-zA-Z0-9_-]{1,64}$`);
    }
    if (this.tools.has(spec.name)) throw new Error(`Tool "${spec.name}" is registered twice`);
    const approval = spec.needsApproval;
    if (approval !== undefined && typeof approval !== 'boolean' && typeof approval !== 'function') {
      throw new Error(`Tool "${spec.name}": needsApproval must be true, false or a function`);
    }
    let validate: ValidateFunction;
    try {
      validate = this.ajv.compile(spec.parameters);
    } catch (error) {
      this.forgetSchema(spec.parameters);
      throw new Error(`Tool "${spec.name}" has invalid parameters: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const definition: ToolDefinition = Object.freeze({
      name: spec.name,
      description: spec.description,
      parameters: spec.parameters,
    });
    const registered: RegisteredTool = { spec, validate, owner, definition };
    this.tools.set(spec.name, registered);
    return () => {
      if (this.tools.get(spec.name) === registered) this.unregister(spec.name, registered);
    };
  }

  /** Removes every tool of an owner; returns how many. */
  removeOwner(owner: string): number {
    let removed = 0;
    for (const [name, tool] of this.tools) {
      if (tool.owner === owner) {
        this.unregister(name, tool);
        removed++;
      }
    }
    return removed;
  }

  private unregister(name: string, tool: RegisteredTool): void {
    this.tools.delete(name);
    this.forgetSchema(tool.spec.parameters);
  }

  /**
   * Ajv keeps every schema it compiled and claims its `$id`: without this, a tool whose schema
   * has an `$id` could not be registered again after it was removed.
   */
  private forgetSchema(schema: JsonSchema): void {
    try {
      this.ajv.removeSchema(schema);
    } catch {
      // Never added: nothing to forget.
    }
  }

  /** Whether a tool of that name is registered. */
  has(name: string): boolean {
    return this.tools.has(name);
  }

  /**
   * Definitions of all tools, in registration order, as offered to the model: a new list of the
   * same frozen definition objects each time (replace an entry to change what is offered).
   */
  definitions(): ToolDefinition[] {
    return [...this.tools.values()].map(({ definition }) => definition);
  }

  /**
   * Whether the tool has an approval rule at all (`needsApproval` set): when not, no call of it
   * waits for a person, and `needsApproval` need not be asked. Synchronous and cheap.
   */
  mayNeedApproval(name: string): boolean {
    return !!this.tools.get(name)?.spec.needsApproval;
  }

  /**
   * Whether a call of the tool with these arguments must wait for a person's approval (its
   * `needsApproval`). `false` for an unknown tool and for arguments its schema refuses (the
   * call fails without running anyway); `true` when the tool's function throws (fail closed).
   */
  async needsApproval(name: string, args: unknown, context: ToolCallContext): Promise<boolean> {
    const tool = this.tools.get(name);
    const rule = tool?.spec.needsApproval;
    if (!tool || !rule || !tool.validate(args)) return false;
    if (rule === true) return true;
    try {
      return (await rule(args, context)) === true;
    } catch {
      return true;
    }
  }

  /** Runs a tool call; resolves with its result, never rejects. */
  async execute(name: string, args: unknown, context: ToolCallContext): Promise<ToolResult> {
    const tool = this.tools.get(name);
    if (!tool) return toolError(`Unknown tool "${name}"`);
    if (!tool.validate(args)) {
      const details = this.ajv.errorsText(tool.validate.errors, { dataVar: 'arguments' });
      return toolError(`Invalid arguments for "${name}": ${details}`);
    }
    if (context.signal.aborted) return toolError('The turn was stopped before the tool ran');
    return runWithLimits(tool.spec, args, context);
  }
}

/**
 * The handler's result, or the timeout's or the stop's, whichever comes first; the timer and
 * the abort listener go as soon as one has come. One promise settled by whichever finishes (not
 * a race of three). The timer starts before the handler, so it fires before any timer of the
 * same length the handler starts (an MCP client's request timeout): the call's timeout is ours.
 * A handler that returns a plain value (not a promise) has finished before any timer could
 * fire: it needs no listener, and it was stopped only if the turn was stopped while it ran (by
 * the handler itself, say), as the listener would have seen.
 */
function runWithLimits(
  spec: ToolSpec,
  args: unknown,
  context: ToolCallContext,
): Promise<ToolResult> {
  const timeoutMs = spec.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let finish: ((result: ToolResult) => void) | undefined;
  const timer = setTimeout(
    () => finish?.(toolError(`Tool "${spec.name}" timed out after ${timeoutMs} ms`)),
    timeoutMs,
  );
  let value: unknown;
  try {
    value = spec.handler(args, context);
  } catch (error) {
    clearTimeout(timer);
    return Promise.resolve(failed(spec, error));
  }
  const { signal } = context;
  if (!isThenable(value)) {
    clearTimeout(timer);
    return Promise.resolve(signal.aborted ? stopped(spec) : resultOf(spec, value));
  }
  return new Promise<ToolResult>((resolve) => {
    const onAbort = () => finish!(stopped(spec));
    finish = (result: ToolResult) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // Through Promise.resolve: a thenable whose `then` throws is a rejection here, not a throw.
    Promise.resolve(value).then(
      (settled) => finish!(resultOf(spec, settled)),
      (error: unknown) => finish!(failed(spec, error)),
    );
  });
}

/** The handler's value as a result (a value that cannot be made text is a failure). */
function resultOf(spec: ToolSpec, value: unknown): ToolResult {
  try {
    if (value instanceof ToolOutput) {
      const images = value.images.length ? { images: [...value.images] } : {};
      return { ok: true, content: value.text, ...images };
    }
    return { ok: true, content: stringify(value) };
  } catch (error) {
    return failed(spec, error);
  }
}

/** The result of a tool call the turn's stop cut short. */
function stopped(spec: ToolSpec): ToolResult {
  return toolError(`Tool "${spec.name}" was stopped`);
}

/** A handler's throw or rejection as a result that says so. */
function failed(spec: ToolSpec, error: unknown): ToolResult {
  return toolError(`Tool "${spec.name}" failed: ${(error as Error)?.message ?? String(error)}`);
}

function stringify(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}
