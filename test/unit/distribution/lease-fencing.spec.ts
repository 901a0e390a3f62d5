import { LeaseFencing } from '../../../src/distribution/redis/lease-fencing';
import type { LeaseGrant } from '../../../src/distribution/redis/session-leases';

/** Grants as a test sets them, standing in for `SessionLeases.grantOf`. */
function leases() {
  const grants = new Map<string, LeaseGrant>();
  return {
    grants,
    grantOf: (sessionId: string) => grants.get(sessionId),
    hold: (sessionId: string, fence: number) => grants.set(sessionId, { sessionId, fence }),
    lose: (sessionId: string) => grants.delete(sessionId),
  };
}

describe('LeaseFencing', () => {
  it("a held session's writes carry its grant's fence, with or without a turn", () => {
    const source = leases();
    const fencing = new LeaseFencing(source);
    source.hold('s', 3);
    expect(fencing.fenceFor('s', 't1')).toBe(3);
    expect(fencing.fenceFor('s')).toBe(3);
  });

  it('a session never held here is not fenced', () => {
    const fencing = new LeaseFencing(leases());
    expect(fencing.fenceFor('s', 't1')).toBeUndefined();
    expect(fencing.fenceFor('s')).toBeUndefined();
  });

  it("a lost session's turn writes keep the last fence held, so a newer claim refuses them", () => {
    const source = leases();
    const fencing = new LeaseFencing(source);
    source.hold('s', 5);
    fencing.granted({ sessionId: 's', fence: 5 });
    source.lose('s');
    expect(fencing.fenceFor('s', 't-old')).toBe(5);
    // What is not a turn's write (an input accepted here for the new holder) goes unfenced.
    expect(fencing.fenceFor('s')).toBeUndefined();
  });

  it('the last fence is learnt from a write too, not only from granted()', () => {
    const source = leases();
    const fencing = new LeaseFencing(source);
    source.hold('s', 8);
    fencing.fenceFor('s', 't');
    source.lose('s');
    expect(fencing.fenceFor('s', 't')).toBe(8);
  });

  it('a session let go cleanly is forgotten', () => {
    const source = leases();
    const fencing = new LeaseFencing(source);
    source.hold('s', 2);
    fencing.granted({ sessionId: 's', fence: 2 });
    source.lose('s');
    fencing.released('s');
    expect(fencing.fenceFor('s', 't')).toBeUndefined();
    expect(fencing.size).toBe(0);
  });

  it('tells the session of an input run here once, and keeps at most 10,000 of them', () => {
    const fencing = new LeaseFencing(leases());
    fencing.runs('in-1', 's');
    expect(fencing.sessionOfInput('in-1')).toBe('s');
    expect(fencing.sessionOfInput('in-1')).toBeUndefined();
    expect(fencing.sessionOfInput('never')).toBeUndefined();

    for (let i = 0; i <= 10_000; i++) fencing.runs(`in-${i}`, `s-${i}`);
    expect(fencing.sessionOfInput('in-0')).toBeUndefined();
    expect(fencing.sessionOfInput('in-1')).toBe('s-1');
    expect(fencing.sessionOfInput('in-10000')).toBe('s-10000');
  });
});
