import type * as o200k from 'gpt-tokenizer/cjs/encoding/o200k_base';
import type { TokenEncoding } from './encoding';

/** Counts the tokens of one text (at most `MAX_ENCODE_PIECE` characters at a time). */
export type TextCounter = (text: string) => number;

/**
 * Special-token markers (`<|endoftext|>`, ...) are ordinary text here: a user who types one gets
 * it counted as the characters it is, as tiktoken's `encode_ordinary` does, and never an error.
 */
const ORDINARY = { disallowedSpecial: new Set<string>() };

/** What the estimator uses of an encoding's module. */
type Encoding = Pick<typeof o200k, 'countTokens'>;

/**
 * The BPE module of each encoding, from `gpt-tokenizer` (pure JavaScript, the same ranks as
 * OpenAI's tiktoken, so the same counts; several times faster than tiktoken's WebAssembly on
 * the short texts a turn adds). Its ranks take about 10 MB and 150 ms per encoding, so they are
 * loaded when the first `TokenEstimator` is made, not when the package is imported; Node's
 * module cache then shares them with every later estimator, the worker threads load the same
 * files, and so may any other user of the module in the host.
 */
const MODULES: Record<TokenEncoding, string> = {
  o200k_base: 'gpt-tokenizer/cjs/encoding/o200k_base',
  cl100k_base: 'gpt-tokenizer/cjs/encoding/cl100k_base',
};

/** The counter of `encoding`. */
export function textCounter(encoding: TokenEncoding): TextCounter {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const api = require(MODULES[encoding]) as Encoding;
  return (text) => api.countTokens(text, ORDINARY);
}

/**
 * Module paths of the encodings' BPE modules, resolved from this file, for the counting worker
 * threads (which load the same modules).
 */
export function encoderModulePaths(): Record<TokenEncoding, string> {
  return {
    o200k_base: require.resolve(MODULES.o200k_base),
    cl100k_base: require.resolve(MODULES.cl100k_base),
  };
}
