import type { ModelCapabilities } from '../contracts';

/** A tiktoken encoding the estimator keeps loaded (same set as `ModelCapabilities.encoding`). */
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
