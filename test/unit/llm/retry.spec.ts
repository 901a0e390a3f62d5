import {
  backoffDelay,
  parseRetryAfter,
  retryCall,
  retryPolicy,
  retryStream,
  sleep,
  type RetryControl,
} from '../../../src/llm/retry';

const headers = (values: Record<string, string>) => new Headers(values);

/** A control that retries errors named "retry" (with an optional Retry-After). */
function control(extra: Partial<RetryControl> = {}): RetryControl {
  return {
    signal: new AbortController().signal,
    retryable: (error) =>
      (error as Error).message.startsWith('retry')
        ? { retryAfterMs: (error as Error & { after?: number }).after }
        : false,
    abortError: () => new Error('aborted'),
    ...extra,
  };
}

/** A policy whose waits are recorded, not waited. */
function recorded(options: Parameters<typeof retryPolicy>[0] = {}) {
  const waits: number[] = [];
  const policy = retryPolicy({
    random: () => 0.5,
    sleep: async (ms) => {
      waits.push(ms);
    },
    ...options,
  });
  return { policy, waits };
}

describe('retry', () => {
  describe('retryPolicy', () => {
    it('defaults to 2 retries, 500 ms base and a 30 s cap', () => {
      expect(retryPolicy()).toMatchObject({ maxRetries: 2, baseDelayMs: 500, maxDelayMs: 30_000 });
    });

    it('falls back to the defaults for negative or non-finite numbers', () => {
      expect(retryPolicy({ maxRetries: -1, baseDelayMs: NaN, maxDelayMs: Infinity })).toMatchObject(
        { maxRetries: 2, baseDelayMs: 500, maxDelayMs: 30_000 },
      );
      expect(retryPolicy({ maxRetries: 0 }).maxRetries).toBe(0);
    });
  });

  describe('backoffDelay', () => {
    const policy = { baseDelayMs: 500, maxDelayMs: 30_000 };

    it('draws a full-jitter delay below base * 2^retry', () => {
      expect(backoffDelay(0, { ...policy, random: () => 0 })).toBe(0);
      expect(backoffDelay(0, { ...policy, random: () => 0.999 })).toBe(499);
      expect(backoffDelay(1, { ...policy, random: () => 0.5 })).toBe(500);
      expect(backoffDelay(3, { ...policy, random: () => 0.5 })).toBe(2000);
    });

    it('caps the exponential growth at maxDelayMs', () => {
      expect(backoffDelay(20, { ...policy, random: () => 0.999 })).toBe(29_970);
    });

    it('takes Retry-After instead, capped at maxDelayMs', () => {
      const random = () => 0.5;
      expect(backoffDelay(0, { ...policy, random }, 0)).toBe(0);
      expect(backoffDelay(2, { ...policy, random }, 1500)).toBe(1500);
      expect(backoffDelay(0, { ...policy, random }, 3_600_000)).toBe(30_000);
      expect(backoffDelay(0, { ...policy, random }, -5)).toBe(0);
    });
  });

  describe('parseRetryAfter', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');

    it('reads seconds, fractions and retry-after-ms', () => {
      expect(parseRetryAfter(headers({ 'retry-after': '7' }), now)).toBe(7000);
      expect(parseRetryAfter(headers({ 'retry-after': '0.5' }), now)).toBe(500);
      expect(parseRetryAfter(headers({ 'retry-after': '0' }), now)).toBe(0);
      expect(parseRetryAfter(headers({ 'retry-after-ms': '250', 'retry-after': '9' }), now)).toBe(
        250,
      );
    });

    it('reads an HTTP date; a past date means now', () => {
      expect(
        parseRetryAfter(headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:30 GMT' }), now),
      ).toBe(30_000);
      expect(
        parseRetryAfter(headers({ 'retry-after': 'Tue, 31 Dec 2024 23:00:00 GMT' }), now),
      ).toBe(0);
    });

    it('ignores absent or unreadable values', () => {
      expect(parseRetryAfter(undefined)).toBeUndefined();
      expect(parseRetryAfter(headers({}))).toBeUndefined();
      expect(parseRetryAfter(headers({ 'retry-after': 'soon' }))).toBeUndefined();
      expect(parseRetryAfter(headers({ 'retry-after': '-3' }))).toBeUndefined();
    });
  });

  describe('sleep', () => {
    afterEach(() => jest.useRealTimers());

    it('waits the given time (fake timers)', async () => {
      jest.useFakeTimers();
      let done = false;
      const waiting = sleep(10_000).then(() => (done = true));

      await jest.advanceTimersByTimeAsync(9_999);
      expect(done).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      await waiting;
      expect(done).toBe(true);
    });

    it('resolves early when aborted, leaving no timer behind', async () => {
      jest.useFakeTimers();
      const controller = new AbortController();
      const waiting = sleep(60_000, controller.signal);

      controller.abort();
      await waiting;

      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('retryCall', () => {
    it('retries retryable errors with growing jittered waits, then succeeds', async () => {
      const { policy, waits } = recorded({ maxRetries: 3, baseDelayMs: 100 });
      let calls = 0;

      const result = await retryCall(
        async () => {
          if (++calls < 4) throw new Error('retry me');
          return 'done';
        },
        policy,
        control(),
      );

      expect(result).toBe('done');
      expect(waits).toEqual([50, 100, 200]);
    });

    it('throws the last error once the retries are used up', async () => {
      const { policy, waits } = recorded({ maxRetries: 2 });
      let calls = 0;

      await expect(
        retryCall(
          async () => {
            throw new Error(`retry ${++calls}`);
          },
          policy,
          control(),
        ),
      ).rejects.toThrow('retry 3');
      expect(waits).toHaveLength(2);
    });

    it('throws a non-retryable error at once', async () => {
      const { policy, waits } = recorded();

      await expect(
        retryCall(
          async () => {
            throw new Error('fatal');
          },
          policy,
          control(),
        ),
      ).rejects.toThrow('fatal');
      expect(waits).toEqual([]);
    });

    it('honours the retryable error’s Retry-After and reports each retry', async () => {
      const { policy, waits } = recorded();
      const seen: unknown[] = [];
      let calls = 0;

      await retryCall(
        async () => {
          if (++calls === 1) throw Object.assign(new Error('retry later'), { after: 1234 });
          return 'ok';
        },
        policy,
        control({ onRetry: (info) => seen.push({ retry: info.retry, delayMs: info.delayMs }) }),
      );

      expect(waits).toEqual([1234]);
      expect(seen).toEqual([{ retry: 1, delayMs: 1234 }]);
    });

    it('throws the abort error when aborted during the wait', async () => {
      const controller = new AbortController();
      const policy = retryPolicy({ sleep: async () => controller.abort() });

      await expect(
        retryCall(
          async () => {
            throw new Error('retry');
          },
          policy,
          control({ signal: controller.signal }),
        ),
      ).rejects.toThrow('aborted');
    });
  });

  describe('retryStream', () => {
    it('reopens a stream that failed before yielding anything', async () => {
      const { policy } = recorded();
      const opened: number[] = [];

      const items: string[] = [];
      for await (const item of retryStream(
        async function* (attempt) {
          opened.push(attempt);
          if (attempt === 0) throw new Error('retry: reset');
          yield 'a';
          yield 'b';
        },
        policy,
        control(),
      )) {
        items.push(item);
      }

      expect(opened).toEqual([0, 1]);
      expect(items).toEqual(['a', 'b']);
    });

    it('never reopens a stream once it yielded', async () => {
      const { policy, waits } = recorded({ maxRetries: 5 });
      const items: string[] = [];
      let opened = 0;

      await expect(
        (async () => {
          for await (const item of retryStream(
            async function* () {
              opened++;
              yield 'token';
              throw new Error('retry: cut');
            },
            policy,
            control(),
          )) {
            items.push(item);
          }
        })(),
      ).rejects.toThrow('retry: cut');
      expect(items).toEqual(['token']);
      expect(opened).toBe(1);
      expect(waits).toEqual([]);
    });

    it('does not wait past the budget left: the error is thrown at once, unannounced', async () => {
      const { policy, waits } = recorded({ maxRetries: 5 });
      const retries: number[] = [];
      let opened = 0;

      await expect(
        (async () => {
          for await (const item of retryStream(
            // eslint-disable-next-line require-yield
            async function* () {
              opened++;
              throw Object.assign(new Error('retry later'), { after: 500 });
            },
            policy,
            control({ remainingMs: () => 499, onRetry: (info) => retries.push(info.retry) }),
          )) {
            void item;
          }
        })(),
      ).rejects.toThrow('retry later');
      expect(opened).toBe(1);
      expect(waits).toEqual([]);
      expect(retries).toEqual([]);
    });

    it('waits within the budget left, and retries', async () => {
      const { policy, waits } = recorded();
      let opened = 0;
      const items: string[] = [];

      for await (const item of retryStream(
        async function* () {
          if (++opened === 1) throw Object.assign(new Error('retry later'), { after: 200 });
          yield 'answer';
        },
        policy,
        control({ remainingMs: () => 201 }),
      )) {
        items.push(item);
      }

      expect(waits).toEqual([200]);
      expect(items).toEqual(['answer']);
    });
  });
});
