import {
  InputRefusedException,
  mapIncomingMessage,
  mapSettlement,
  refusalOf,
  toErrorBody,
  type MessageDto,
} from '../../../../src/api';
import type { DropReason } from '../../../../src/contracts';

describe('mapSettlement (the ?wait=true answer)', () => {
  it('a replied turn: turnId, outcome and reply', () => {
    expect(
      mapSettlement({ settled: 'turn', turnId: 't1', outcome: 'replied', reply: 'hello' }),
    ).toEqual({ settled: 'turn', turnId: 't1', outcome: 'replied', reply: 'hello' });
  });

  it('outcome error: carries the error notice', () => {
    expect(
      mapSettlement({ settled: 'turn', turnId: 't2', outcome: 'error', error: '[error] failed' }),
    ).toEqual({ settled: 'turn', turnId: 't2', outcome: 'error', error: '[error] failed' });
  });

  it.each<DropReason>(['aborted', 'cleared', 'queue-full', 'store-unavailable'])(
    'dropped with reason %s: carries the reason',
    (reason) => {
      expect(mapSettlement({ settled: 'dropped', reason })).toEqual({
        settled: 'dropped',
        reason,
      });
    },
  );

  it('discarded: nothing else', () => {
    expect(mapSettlement({ settled: 'discarded' })).toEqual({ settled: 'discarded' });
  });
});

describe('refusalOf (settlements answered with an error instead of 200)', () => {
  it('dropped queue-full: 429 with Retry-After 2 and the reason in the body', () => {
    const refusal = refusalOf({ settled: 'dropped', reason: 'queue-full' });

    expect(refusal).toBeInstanceOf(InputRefusedException);
    expect(refusal!.getStatus()).toBe(429);
    expect(refusal!.retryAfterSeconds).toBe(2);
    expect(toErrorBody(refusal)).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: "The session's waiting list is full: retry later",
      reason: 'queue-full',
    });
  });

  it('dropped store-unavailable: 503 with Retry-After 5 and the reason in the body', () => {
    const refusal = refusalOf({ settled: 'dropped', reason: 'store-unavailable' });

    expect(refusal!.getStatus()).toBe(503);
    expect(refusal!.retryAfterSeconds).toBe(5);
    expect(toErrorBody(refusal)).toMatchObject({ statusCode: 503, reason: 'store-unavailable' });
  });

  it.each([
    { settled: 'dropped', reason: 'aborted' },
    { settled: 'dropped', reason: 'shutdown' },
    { settled: 'discarded' },
    { settled: 'turn', turnId: 't', outcome: 'error', error: 'x' },
  ] as const)('%j: none (a 200)', (settlement) => {
    expect(refusalOf(settlement)).toBeUndefined();
  });
});

describe('mapIncomingMessage', () => {
  it('keeps the id when given, and no undefined keys', () => {
    const dto = { id: 'in-1', sessionId: 's', content: 'c' } as MessageDto;

    expect(mapIncomingMessage(dto)).toEqual({ id: 'in-1', sessionId: 's', content: 'c' });
  });
});
