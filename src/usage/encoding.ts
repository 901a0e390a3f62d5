import type { ModelCapabilities } from '../contracts';

/** A BPE encoding (OpenAI's names) the estimator keeps loaded (same set as `ModelCapabilities.encoding`). */
export type TokenEncoding = NonNullable<ModelCapabilities['encoding']>;

/** Every encoding the estimator loads at start-up. */
export const TOKEN_ENCODINGS: readonly TokenEncoding[] = ['o200k_base', 'cl100k_base'];

/** The encoding used for model names that match no known family. */
export const DEFAULT_ENCODING: TokenEncoding = 'cl100k_base';

/** Model-name prefixes (after any `provider/` prefix, lower-cased) that use `o200k_base`. */
const O200K_PREFIXES = ['gpt-4o', 'chatgpt-4o', 'gpt-4.1', 'gpt-5', 'o1', 'o3', 'o4'];

/**
 * The encoding to estimate a model's tokens with. `override` (e.g. `ModelCapabilities.encoding`)
 * wins; otherwise `o200k_base` for the gpt-4o, gpt-4.1, gpt-5, o1, o3 and o4 families and
 * `cl100k_base` for everything else. A `provider/` prefix is ignored. Never throws.
 */
export function encodingForModel(model: string, override?: TokenEncoding): TokenEncoding {
  if (override && TOKEN_ENCODINGS.includes(override)) return override;
  const name = String(model ?? '')
    .trim()
    .toLowerCase();
  const bare = name.slice(name.lastIndexOf('/') + 1);
  return O200K_PREFIXES.some((prefix) => bare.startsWith(prefix)) ? 'o200k_base' : DEFAULT_ENCODING;
}

/** Longest piece of text handed to the encoder at once. */
export const MAX_ENCODE_PIECE = 2000;

/**
 * Splits a text into pieces of at most `max` characters for counting, cutting right before a
 * whitespace character where one is near (tiktoken's pre-tokenizer splits there too, so the sum
 * of the pieces' counts equals the whole count for ordinary text), else hard, never inside a
 * surrogate pair. BPE time grows faster than linearly on long runs without breaks (a 40,000
 * character run takes about a second), so counting piecewise keeps every count fast.
 * Self-contained: its source is also evaluated inside the counting worker threads.
 */
export function splitForCounting(text: string, max = 2000): string[] {
  if (text.length <= max) return [text];
  const pieces = [];
  let start = 0;
  while (text.length - start > max) {
    let cut = start + max;
    // Best: a single space between two words (" word" is one token either way).
    for (let i = cut; i > start + max / 2; i--) {
      if (text[i] === ' ' && /\S/.test(text[i - 1]) && /\S/.test(text[i + 1] ?? '')) {
        cut = i;
        break;
      }
    }
    const code = text.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut--;
    pieces.push(text.slice(start, cut));
    start = cut;
  }
  pieces.push(text.slice(start));
  return pieces;
}
