/** The ISO text of the last whole second formatted, to which the milliseconds are added. */
let isoSecond = { second: NaN, prefix: '' };

/**
 * `new Date(ms).toISOString()` for times from 1970 to 9999, formatting the date only once per
 * second (a turn stamps several times: activity, acceptance, settlement, last turn); flat (see
 * `newId`), as it is kept. Other times go the platform's way.
 * @internal
 */
export function isoTime(ms: number): string {
  if (!(Number.isInteger(ms) && ms >= 0 && ms < MAX_FOUR_DIGIT_YEAR)) {
    return new Date(ms).toISOString();
  }
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond.second) {
    const iso = new Date(second * 1000).toISOString();
    isoSecond = { second, prefix: iso.slice(0, 20) };
  }
  const millis = ms - second * 1000;
  const text = `${isoSecond.prefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
  text.charCodeAt(0);
  return text;
}

/** `new Date().toISOString()` through `isoTime`. @internal */
export function isoNow(): string {
  return isoTime(Date.now());
}

/** 10000-01-01T00:00:00Z: from here on the year has five digits (and a sign in ISO text). */
const MAX_FOUR_DIGIT_YEAR = 253402300800000;
