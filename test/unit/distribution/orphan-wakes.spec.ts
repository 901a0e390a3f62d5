import { wakeOrphanedSessions } from '../../../src/distribution/redis/orphan-wakes';

/** The sweep's parts: unsettled inputs of `sessions`, the given holders and sessions run here. */
function parts(options: {
  unsettled: string[];
  holders?: Record<string, string>;
  here?: string[];
  failing?: boolean;
}) {
  const woken: Array<[string, number]> = [];
  return {
    woken,
    inbox: {
      unsettled: () =>
        options.failing
          ? Promise.reject(new Error('database away'))
          : Promise.resolve(options.unsettled.map((sessionId) => ({ sessionId }))),
    },
    holder: (sessionId: string) => Promise.resolve(options.holders?.[sessionId]),
    busyHere: (sessionId: string) => (options.here ?? []).includes(sessionId),
    wake: (sessionId: string, delayMs: number) => {
      woken.push([sessionId, delayMs]);
      return Promise.resolve();
    },
    delayMs: 2000,
  };
}

describe('wakeOrphanedSessions (Redis back, perhaps empty)', () => {
  it('wakes each session with unsettled inputs once, a lease later, unless it is held or run here', async () => {
    const p = parts({
      unsettled: ['a', 'b', 'a', 'c', 'd'],
      holders: { b: 'other-instance' },
      here: ['c'],
    });

    await expect(wakeOrphanedSessions(p)).resolves.toEqual(['a', 'd']);
    expect(p.woken).toEqual([
      ['a', 2000],
      ['d', 2000],
    ]);
  });

  it('nothing unsettled: nothing woken', async () => {
    const p = parts({ unsettled: [] });
    await expect(wakeOrphanedSessions(p)).resolves.toEqual([]);
    expect(p.woken).toEqual([]);
  });

  it('a failing inbox is reported, never thrown (it runs from an event listener)', async () => {
    const p = parts({ unsettled: ['a'], failing: true });
    await expect(wakeOrphanedSessions(p)).resolves.toEqual([]);
    expect(p.woken).toEqual([]);
  });
});
