import { ProbeTimeoutError, SingleFlight, withTimeout } from '../../../../src/api/health/probe';

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
});
