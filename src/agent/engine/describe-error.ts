/**
 * An error for the log: its stack (or text) and, behind a store error, the driver's own words
 * (its `cause`), which never go to the session.
 */
export function describeError(error: unknown): string {
  const text = (value: unknown): string =>
    value instanceof Error ? (value.stack ?? value.message) : String(value);
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  return cause === undefined ? text(error) : `${text(error)} (cause: ${text(cause)})`;
}
