/** The benchmarks' statistics: one definition of median and percentile for every bench. */

/** The `p`-th percentile (0-100) of `values`: the value at rank floor(n * p / 100), sorted. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

/** The median of `values` (the upper middle one for an even count). */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}
