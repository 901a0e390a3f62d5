import fc from 'fast-check';
import { isoNow, isoTime } from '../../../src/contracts';

describe("isoTime (the stores' and the engine's timestamps)", () => {
  it('is new Date(ms).toISOString() for any time, in and out of the cached second', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 0, max: 253402300799999 }),
          fc.integer({ min: -8.64e15, max: 8.64e15 }),
          fc.double({ min: 0, max: 2e12, noNaN: true }),
        ),
        (ms) => {
          expect(isoTime(ms)).toBe(new Date(ms).toISOString());
        },
      ),
    );
  });

  it('the same second twice, then the next: each as the platform formats it', () => {
    const base = Date.UTC(2026, 11, 5, 21, 59, 59, 0);
    for (const ms of [base + 7, base + 42, base + 999, base + 1000, base + 1005, base + 60_000]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it('isoNow is now', () => {
    const before = Date.now();
    const now = Date.parse(isoNow());
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });
});
