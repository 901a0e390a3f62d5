import {
  CachedProbe,
  ProbeTimeoutError,
  SingleFlight,
  withTimeout,
} from '../../../../src/api/health/probe';

describe('health probes', () => {
  it('withTimeout: a probe that never answers rejects with "timed out after …"', async () => {
    const never = new Promise<void>(() => undefined);

    await expect(withTimeout(never, 20)).rejects.toEqual(new ProbeTimeoutError(20));
    await expect(withTimeout(never, 1500).catch((e: Error) => e.message)).resolves.toBe(
      'timed out after 1.5 s',
    );
  });

  it('withTimeout: an answer in time passes through, a failure too', async () => {
    await expect(withTimeout(Promise.resolve(7), 1000)).resolves.toBe(7);
    await expect(withTimeout(Promise.reject(new Error('down')), 1000)).rejects.toThrow('down');
  });

  it('SingleFlight: checks share the running probe, and start a new one once it settled', async () => {
    const flight = new SingleFlight<number>();
    let started = 0;
    let finish!: (n: number) => void;
    const start = () => {
      started++;
      return new Promise<number>((resolve) => (finish = resolve));
    };

    const first = flight.run(start);
    const second = flight.run(start);
    finish(1);

    expect(await Promise.all([first, second])).toEqual([1, 1]);
    expect(started).toBe(1);
    const third = flight.run(start);
    finish(2);
    expect(await third).toBe(2);
    expect(started).toBe(2);
  });

  describe('CachedProbe (the model ping)', () => {
    let clock = 0;
    let pings = 0;
    let answer: 'up' | 'down' = 'up';
    const ping = () => {
      pings++;
      return answer === 'up' ? Promise.resolve() : Promise.reject(new Error('down'));
    };
    const outcome = (p: Promise<void>) =>
      p.then(
        () => 'up',
        (e: Error) => e.message,
      );
    beforeEach(() => {
      clock = 0;
      pings = 0;
      answer = 'up';
    });

    it('the first check waits for its ping; checks within the ttl ping no more', async () => {
      const probe = new CachedProbe(10_000, () => clock);

      expect(await outcome(probe.run(ping))).toBe('up');
      clock = 9_999;
      expect(await outcome(probe.run(ping))).toBe('up');
      expect(pings).toBe(1);
    });

    it('past the ttl a check answers with the last result and pings again; the next one sees the new result', async () => {
      const probe = new CachedProbe(10_000, () => clock);
      await probe.run(ping);
      answer = 'down';
      clock = 10_000;

      expect(await outcome(probe.run(ping))).toBe('up');
      expect(pings).toBe(2);
      expect(await outcome(probe.run(ping))).toBe('down');
      expect(pings).toBe(2);
    });

    it('a failure stands as long as a success; checks during a slow ping share it', async () => {
      const probe = new CachedProbe(10_000, () => clock);
      let refuse!: (error: Error) => void;
      const slow = new Promise<void>((_, reject) => (refuse = reject));
      let started = 0;
      const slowPing = () => {
        started++;
        return slow;
      };

      const first = outcome(probe.run(slowPing));
      const second = outcome(probe.run(slowPing));
      refuse(new Error('refused'));

      expect([await first, await second]).toEqual(['refused', 'refused']);
      expect(started).toBe(1);
      clock = 5_000;
      expect(await outcome(probe.run(slowPing))).toBe('refused');
      expect(started).toBe(1);
    });
  });
});
