/** Longest user-provided value written to the log, in characters (the rest is cut). */
export const MAX_LOGGED_LENGTH = 300;

/**
 * What JSON.stringify leaves as is but a terminal or a log pipeline reads as control: C1
 * controls (0x7F-0x9F) and the Unicode line and paragraph separators.
 */
const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;

/** Text that JSON.stringify leaves unchanged: printable ASCII but `"` and `\`. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

const hex = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * A user-provided value as it may be written to the log: quoted and escaped like a JSON
 * string (so `\n`, ESC, NUL and the C1 controls cannot forge log lines or drive a terminal),
 * cut to {@link MAX_LOGGED_LENGTH} characters so one request cannot flood the log.
 */
export function escapeForLog(value: unknown): string {
  // Nearly every logged value (an id, a session name) is short printable ASCII without a quote
  // or a backslash: quoted as it is, which is what JSON.stringify would give.
  if (typeof value === 'string' && value.length <= MAX_LOGGED_LENGTH && PLAIN.test(value)) {
    return `"${value}"`;
  }
  let text: string;
  try {
    text = typeof value === 'string' ? value : String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  const cut =
    text.length > MAX_LOGGED_LENGTH
      ? `${text.slice(0, MAX_LOGGED_LENGTH)}… (${text.length} chars)`
      : text;
  return JSON.stringify(cut).replace(UNESCAPED_BY_JSON, hex);
}

/** An error as one escaped log value: its message (or its text), never multi-line. */
export function errorForLog(error: unknown): string {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : error;
  return escapeForLog(message);
}
