/**
 * The shapes of the environment variables the server reads: each parser returns the value or
 * throws `ConfigError`, one line naming the variable.
 */

/** A configuration error: one line naming the variable. */
export class ConfigError extends Error {}

/** A positive integer variable, or its default when unset. */
export function positive(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || !Number.isSafeInteger(Number(raw))) {
    throw new ConfigError(`${name} must be a positive integer, got "${raw}"`);
  }
  return Number(raw);
}

/** A whole number from the environment, at least `min`; the default when unset. */
export function integer(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
    throw new ConfigError(`${name} must be a whole number of at least ${min}, got "${raw}"`);
  }
  return Number(raw);
}

/** A URL variable with one of `protocols`. */
export function url(name: string, raw: string, protocols: string[]): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return raw;
}

/** A `true` / `false` variable (any case), or its default when unset or empty. */
export function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase() || String(fallback);
  if (raw !== 'true' && raw !== 'false') {
    throw new ConfigError(`${name} must be true or false, got "${raw}"`);
  }
  return raw === 'true';
}
