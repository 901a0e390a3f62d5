import type { PendingApproval } from '../../../../src/contracts';
import { ApprovalRegistry } from '../../../../src/agent/tools/approval.registry';

const pending = (callId = 'c1', sessionId = 's1'): PendingApproval => ({
  sessionId,
  turnId: 't1',
  callId,
  name: 'transfer',
  args: { amount: 5 },
  requestedAt: '2026-12-03T00:00:00.000Z',
});

describe('ApprovalRegistry', () => {
  let sut: ApprovalRegistry;

  beforeEach(() => {
    sut = new ApprovalRegistry();
  });

  it('lists a waiting call until it is decided, and resolves with the decision', async () => {
    const waiting = sut.wait(pending(), 60_000, new AbortController().signal);

    expect(sut.list('s1')).toEqual([pending()]);
    expect(sut.list('other')).toEqual([]);
    const by = { platform: 'web', userId: 'alice' };
    expect(sut.decide('s1', 'c1', { approved: false, reason: 'no', by })).toBe(true);

    expect(await waiting).toEqual({
      record: { approved: false, reason: 'no', by, at: expect.any(String) },
    });
    expect(sut.list('s1')).toEqual([]);
    expect(sut.decide('s1', 'c1', { approved: true })).toBe(false);
  });

  it('a call of another session or an unknown call id is not decided', async () => {
    const waiting = sut.wait(pending(), 60_000, new AbortController().signal);

    expect(sut.decide('s2', 'c1', { approved: true })).toBe(false);
    expect(sut.decide('s1', 'c2', { approved: true })).toBe(false);
    sut.decide('s1', 'c1', { approved: true });
    expect(await waiting).toMatchObject({ record: { approved: true } });
  });

  it('a call nobody decides resolves as denied and timedOut after the timeout', async () => {
    const outcome = await sut.wait(pending(), 20, new AbortController().signal);

    expect(outcome).toEqual({
      record: { approved: false, at: expect.any(String), timedOut: true },
    });
    expect(sut.list('s1')).toEqual([]);
  });

  it('an abort resolves with stopped and forgets the call; an aborted signal never waits', async () => {
    const controller = new AbortController();
    const waiting = sut.wait(pending(), 60_000, controller.signal);
    controller.abort();

    expect(await waiting).toEqual({ stopped: true });
    expect(sut.list('s1')).toEqual([]);
    expect(await sut.wait(pending('c2'), 60_000, controller.signal)).toEqual({ stopped: true });
    expect(sut.list('s1')).toEqual([]);
  });
});
