import { getEventListeners } from 'node:events';
import { CallBudget, CallSignal } from '../../../src/llm/call-signal';

/**
 * The deadlines and abort wiring of one model call, on a fake clock: the idle timer, the budget
 * the attempts before the first token share, and that an ended attempt leaves nothing behind
 * on the caller's signal.
 */
describe('CallSignal and CallBudget', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

  describe('the caller link', () => {
    it('aborts the attempt with the caller’s reason, then unlinks when the attempt ends', () => {
      const caller = new AbortController();
      const call = new CallSignal(caller.signal, new CallBudget(0));
      expect(listeners(caller.signal)).toBe(1);

      caller.abort('stop');

      expect(call.signal.aborted).toBe(true);
      expect(call.signal.reason).toBe('stop');
      expect(call.stalled).toBeUndefined();
      call.end(false);
      expect(listeners(caller.signal)).toBe(0);
    });

    it('leaves no listener on a long-lived caller signal after many attempts, however they end', () => {
      const caller = new AbortController();
      const budget = new CallBudget(1000);
      for (let i = 0; i < 100; i++) new CallSignal(caller.signal, budget).end(i % 2 === 0);

      expect(listeners(caller.signal)).toBe(0);
      expect(jest.getTimerCount()).toBe(0);
      expect(budget.attempts).toBe(100);
    });

    it('starts aborted, with no listener, when the caller already aborted', () => {
      const caller = new AbortController();
      caller.abort();

      const call = new CallSignal(caller.signal, new CallBudget(1000));

      expect(call.signal.aborted).toBe(true);
      expect(listeners(caller.signal)).toBe(0);
      call.end(false);
    });

    it('aborts an attempt that ends incomplete (its connection is released), not a completed one', () => {
      const caller = new AbortController().signal;
      const completed = new CallSignal(caller, new CallBudget(1000));
      const broken = new CallSignal(caller, new CallBudget(1000));

      completed.end(true);
      broken.end(false);

      expect(completed.signal.aborted).toBe(false);
      expect(broken.signal.aborted).toBe(true);
    });
  });

  describe('the idle timer', () => {
    it('aborts an attempt silent for the idle timeout, saying why', () => {
      const call = new CallSignal(new AbortController().signal, new CallBudget(1000));

      jest.advanceTimersByTime(999);
      expect(call.signal.aborted).toBe(false);
      jest.advanceTimersByTime(1);

      expect(call.signal.aborted).toBe(true);
      expect(call.stalled).toMatchObject({ reason: 'idle', idleTimeoutMs: 1000, midAnswer: false });
    });

    it('counts the silence from the last sign of life', () => {
      const call = new CallSignal(new AbortController().signal, new CallBudget(1000));

      jest.advanceTimersByTime(800);
      call.touch();
      jest.advanceTimersByTime(800);
      expect(call.signal.aborted).toBe(false);
      jest.advanceTimersByTime(200);

      expect(call.stalled?.reason).toBe('idle');
    });

    it('waits while paused (the consumer has a chunk), and counts again from resume', () => {
      const budget = new CallBudget(1000);
      const call = new CallSignal(new AbortController().signal, budget);
      // Chunks are handed to the consumer only once a token came.
      budget.answered();

      call.pause();
      jest.advanceTimersByTime(5000);
      expect(call.signal.aborted).toBe(false);
      call.resume();
      jest.advanceTimersByTime(999);
      expect(call.signal.aborted).toBe(false);
      jest.advanceTimersByTime(1);

      expect(call.stalled?.reason).toBe('idle');
    });

    it('is off for a timeout of 0: no timer at all', () => {
      const call = new CallSignal(new AbortController().signal, new CallBudget(0));

      expect(jest.getTimerCount()).toBe(0);
      call.end(true);
    });

    it('stops when the attempt ends', () => {
      const call = new CallSignal(new AbortController().signal, new CallBudget(1000));

      call.end(true);
      jest.advanceTimersByTime(5000);

      expect(call.signal.aborted).toBe(false);
      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('the budget before the first token', () => {
    it('gives the attempts twice the idle timeout in total: a second attempt gets what is left', () => {
      const caller = new AbortController().signal;
      const budget = new CallBudget(1000);
      const first = new CallSignal(caller, budget);
      jest.advanceTimersByTime(1000);
      expect(first.stalled?.reason).toBe('idle');
      first.end(false);
      jest.advanceTimersByTime(300); // a retry's wait

      const second = new CallSignal(caller, budget);
      jest.advanceTimersByTime(699);
      expect(second.signal.aborted).toBe(false);
      jest.advanceTimersByTime(1);

      expect(second.stalled).toMatchObject({ reason: 'budget', attempts: 2, midAnswer: false });
      expect(budget.remainingMs()).toBeLessThanOrEqual(0);
    });

    it('no longer applies once a token came: only the idle timer is left, mid-answer', () => {
      const budget = new CallBudget(1000);
      const call = new CallSignal(new AbortController().signal, budget);
      jest.advanceTimersByTime(900);
      call.touch();
      budget.answered();
      for (let i = 0; i < 5; i++) {
        jest.advanceTimersByTime(900);
        call.touch();
      }
      expect(call.signal.aborted).toBe(false);
      expect(budget.remainingMs()).toBe(Infinity);

      jest.advanceTimersByTime(1000);

      expect(call.stalled).toMatchObject({ reason: 'idle', midAnswer: true });
    });
  });
});
