import * as cl100k from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/cjs/encoding/o200k_base';
import type { TokenEncoding } from './encoding';

/** Counts the tokens of one text (at most `MAX_ENCODE_PIECE` characters at a time). */
export type TextCounter = (text: string) => number;

/**
 * Special-token markers (`<|endoftext|>`, ...) are ordinary text here: a user who types one gets
 * it counted as the characters it is, as tiktoken's `encode_ordinary` does, and never an error.
 */
const ORDINARY = { disallowedSpecial: new Set<string>() };

/**
 * The BPE of each encoding, from `gpt-tokenizer` (pure JavaScript, the same ranks as OpenAI's
 * tiktoken, so the same counts; several times faster than tiktoken's WebAssembly on the short
 * texts a turn adds). Its modules are loaded once per process and shared with any other user of
 * them in the host.
 */
const APIS: Record<TokenEncoding, Pick<typeof o200k, 'countTokens'>> = {
  o200k_base: o200k,
  cl100k_base: cl100k,
};

/** The counter of `encoding`. */
export function textCounter(encoding: TokenEncoding): TextCounter {
  const api = APIS[encoding];
  return (text) => api.countTokens(text, ORDINARY);
}

/**
 * Module paths of the encodings' BPE modules, resolved from this file, for the counting worker
 * threads (which load the same modules).
 */
export function encoderModulePaths(): Record<TokenEncoding, string> {
  return {
    o200k_base: require.resolve('gpt-tokenizer/cjs/encoding/o200k_base'),
    cl100k_base: require.resolve('gpt-tokenizer/cjs/encoding/cl100k_base'),
  };
}
