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
});
