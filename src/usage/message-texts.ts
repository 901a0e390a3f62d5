import { WellKnownMetadataKeys, type ModelMessage, type ToolDefinition } from '../contracts';
import type { TokenEncoding } from './encoding';

/** Tokens every chat message costs besides its texts (OpenAI chat format). */
export const MESSAGE_OVERHEAD = 3;
/** Tokens every tool call of an assistant message costs besides its name and arguments. */
export const TOOL_CALL_OVERHEAD = 3;
/** Tokens that prime the model's reply; added once per message list. */
export const REPLY_PRIMING = 3;
/** Tokens every tool definition costs besides the JSON of its function definition. */
export const TOOL_DEFINITION_OVERHEAD = 4;
/** A token count per encoding: the shape of `metadata.tokenCount` on persisted messages. */
export type TokenCounts = Partial<Record<TokenEncoding, number>>;

/** The texts of a message that are counted, and its fixed overhead. */
export interface MessageTexts {
  texts: string[];
  overhead: number;
}

/**
 * Calls `visit` with each text of a message that costs tokens, in order: role, content,
 * reasoning, and each tool call's name and arguments (images are not counted, nor the tool-call
 * id of a tool result). Returns the message's fixed overhead, or `undefined` as soon as `visit`
 * returns false. The one definition of what is counted; `messageTexts` lists it.
 */
export function visitTexts(
  message: ModelMessage,
  visit: (text: string) => boolean,
): number | undefined {
  const content = message.content as unknown;
  if (!visit(String(message.role ?? ''))) return undefined;
  const text =
    typeof content === 'string' ? content : content == null ? '' : JSON.stringify(content);
  if (!visit(text)) return undefined;
  if (message.reasoningContent && !visit(message.reasoningContent)) return undefined;
  const calls = message.toolCalls ?? [];
  for (const call of calls) {
    if (!visit(call.function?.name ?? '') || !visit(call.function?.arguments ?? '')) {
      return undefined;
    }
  }
  return MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls.length;
}

/** The texts of a message that cost tokens (see `visitTexts`), and its fixed overhead. */
export function messageTexts(message: ModelMessage): MessageTexts {
  const texts: string[] = [];
  const overhead = visitTexts(message, (text) => texts.push(text) > 0)!;
  return { texts, overhead };
}

/** The JSON text a tool definition is counted as: `{ name, description, parameters }`. */
export function toolDefinitionJson(tool: ToolDefinition): string {
  return JSON.stringify({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
  });
}

/** Read once: a re-exported binding is a getter call on every access. */
const TOKEN_COUNT = WellKnownMetadataKeys.TokenCount;

/** A valid count in a stored `metadata.tokenCount`, if any. */
export function persistedCount(message: ModelMessage, encoding: TokenEncoding): number | undefined {
  const stored = message.metadata?.[TOKEN_COUNT] as TokenCounts | undefined;
  const value = stored && typeof stored === 'object' ? stored[encoding] : undefined;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * Sets `encoding`'s count in the message's own `metadata.tokenCount` (a new object: a stored
 * one may be shared and frozen), the counts of other encodings kept.
 */
export function stampCount(message: ModelMessage, encoding: TokenEncoding, count: number): void {
  const metadata = (message.metadata ??= {});
  const known = metadata[TOKEN_COUNT] as TokenCounts | undefined;
  metadata[TOKEN_COUNT] = known ? { ...known, [encoding]: count } : { [encoding]: count };
}
