import { MemoryInputInbox } from '../../../../src/session-bridge';

describe('MemoryInputInbox', () => {
  it('keeps at most maxSettled settled entries (oldest forgotten first), never an unsettled one', async () => {
    const inbox = new MemoryInputInbox(2);
    for (const id of ['a', 'b', 'c', 'd']) await inbox.accept({ id, sessionId: 's', content: id });
    await inbox.settle(['a', 'b', 'c'], { settled: 'discarded' });

    expect(await inbox.get('a')).toBeUndefined();
    expect((await inbox.get('b'))?.settlement).toEqual({ settled: 'discarded' });
    expect((await inbox.get('c'))?.settlement).toEqual({ settled: 'discarded' });
    expect((await inbox.unsettled()).map((e) => e.id)).toEqual(['d']);
  });

  it('forgets the oldest settled entries in batches: never more than maxSettled kept, the newest always kept', async () => {
    const inbox = new MemoryInputInbox(160);
    // Each round looks at the newest 170 entries and the one just older: whatever is older was
    // found gone in an earlier round, and a forgotten entry never comes back (linear, not
    // quadratic: every entry of every round took 17 s on a loaded CI machine).
    const WINDOW = 170;
    for (let i = 0; i < 1000; i++) {
      await inbox.accept({ id: `m${i}`, sessionId: 's', content: 'x' });
      await inbox.settle([`m${i}`], { settled: 'discarded' });
      const from = Math.max(0, i - WINDOW + 1);
      if (from > 0) expect(await inbox.get(`m${from - 1}`)).toBeUndefined();
      const ids = Array.from({ length: i - from + 1 }, (_, k) => from + k);
      const kept = (await Promise.all(ids.map((k) => inbox.get(`m${k}`))))
        .map((e, k) => (e ? ids[k] : -1))
        .filter((k) => k >= 0);
      expect(kept.length).toBeLessThanOrEqual(160);
      // The kept ones are the newest, in one run up to the one just settled.
      expect(kept[kept.length - 1]).toBe(i);
      expect(kept).toEqual([...Array(kept.length).keys()].map((k) => i - kept.length + 1 + k));
      // A batch forgets a sixteenth at most: the window stays deep.
      if (i >= 160) expect(kept.length).toBeGreaterThanOrEqual(150);
    }
  });

  it('an entry accepted with a generated id is kept until it settles, then forgotten', async () => {
    const inbox = new MemoryInputInbox();
    await inbox.accept({ id: 'gen', sessionId: 's', content: 'x' }, { generatedId: true });
    await inbox.accept({ id: 'sent', sessionId: 's', content: 'y' });
    await inbox.enterTurn(['gen', 'sent'], 't1');

    // Until it settles it is recorded like any other: a restart would resume it.
    expect(await inbox.get('gen')).toMatchObject({ id: 'gen', turnId: 't1' });
    expect((await inbox.unsettled('s')).map((e) => e.id)).toEqual(['gen', 'sent']);

    await inbox.settle(['gen', 'sent'], { settled: 'discarded' });

    expect(await inbox.get('gen')).toBeUndefined();
    // A client's id is kept for deduplication: its repeat gets the first settlement.
    const repeat = await inbox.accept({ id: 'sent', sessionId: 's', content: 'y' });
    expect(repeat).toMatchObject({
      duplicate: true,
      entry: { settlement: { settled: 'discarded' } },
    });
  });
});
