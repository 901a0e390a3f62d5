/** Multipliers of the units a size string may carry (powers of 1024, as `bytes` reads them). */
const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/**
 * A body size in bytes: a positive number, or a string such as `'2mb'`, `'512kb'`, `'1000'`
 * (the forms body-parser's `limit` takes), read the same way so that the socket payload limit
 * and the REST body limit are one number. `undefined` when it is not a size.
 */
export function byteSizeOf(value: number | string): number | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) && value > 0 ? Math.floor(value) : undefined;
  }
  if (typeof value !== 'string') return undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!match) return undefined;
  const bytes = Math.floor(Number(match[1]) * UNITS[(match[2] ?? 'b').toLowerCase()]);
  return bytes > 0 ? bytes : undefined;
}
