import { TurnDeadline } from '../../../../src/agent/engine/turn-deadline';

describe('TurnDeadline', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('expires after its limit', () => {
    const expire = jest.fn();
    new TurnDeadline(1000, expire);

    jest.advanceTimersByTime(999);
    expect(expire).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('a pause stops the clock; on resume it runs for the time that was left', () => {
    const expire = jest.fn();
    const deadline = new TurnDeadline(1000, expire);
    jest.advanceTimersByTime(600);

    const resume = deadline.pause();
    jest.advanceTimersByTime(5000);
    expect(expire).not.toHaveBeenCalled();
    resume();
    jest.advanceTimersByTime(399);
    expect(expire).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('pauses nest: the clock runs again when the last one resumes (a resume counts once)', () => {
    const expire = jest.fn();
    const deadline = new TurnDeadline(100, expire);
    const first = deadline.pause();
    const second = deadline.pause();

    first();
    first();
    jest.advanceTimersByTime(1000);
    expect(expire).not.toHaveBeenCalled();
    second();
    jest.advanceTimersByTime(100);
    expect(expire).toHaveBeenCalledTimes(1);
  });

  it('a cleared deadline never fires, paused or not', () => {
    const expire = jest.fn();
    const deadline = new TurnDeadline(100, expire);
    const resume = deadline.pause();
    deadline.clear();
    resume();

    jest.advanceTimersByTime(1000);
    expect(expire).not.toHaveBeenCalled();
  });
});
