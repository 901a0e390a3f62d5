import { MemoryMessageLog } from '../../../../src/session-bridge';
import type { NewMessage } from '../../../../src/contracts';

const message = (content: string, extra: Partial<NewMessage> = {}): NewMessage => ({
  sessionId: 's',
  role: 'assistant',
  content,
  metadata: { turnId: 't1', nested: { list: [1, 2] } },
  ...extra,
});

describe('MemoryMessageLog (isolation without copying whole windows)', () => {
  it('a reader owns the top level and metadata; nested values are frozen and shared, the store never changes', async () => {
    const log = new MemoryMessageLog();
    const given = message('a', {
      toolCalls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
    });
    await log.append([given]);
    (given.metadata as { nested: { list: number[] } }).nested.list.push(3);

    const [first] = await log.history('s');
    first.content = 'changed';
    first.metadata.turnId = 'changed';
    const [second] = await log.history('s');

    expect(second).not.toBe(first);
    expect(second.content).toBe('a');
    expect(second.metadata).toMatchObject({ turnId: 't1', nested: { list: [1, 2] } });
    expect(Object.isFrozen(second.toolCalls)).toBe(true);
    expect(Object.isFrozen(second.metadata.nested)).toBe(true);
    expect(() => second.toolCalls!.push(second.toolCalls![0])).toThrow(TypeError);
  });

  it('count follows appends, control kinds, rollback and deletion without walking the log', async () => {
    const log = new MemoryMessageLog();
    await log.append([message('1'), message('2'), message('m', { kind: 'event-marker' })]);
    await log.append([message('3', { metadata: { turnId: 't2' } })]);
    expect(await log.count('s')).toBe(3);

    expect(await log.rollbackTurn('s', 't1')).toBe(3);
    expect(await log.count('s')).toBe(1);
    await log.deleteSession('s');
    expect(await log.count('s')).toBe(0);
  });

  it('rollback of one turn among 20,000 messages keeps the others in order', async () => {
    const log = new MemoryMessageLog();
    const batch = Array.from({ length: 20_000 }, (_, i) =>
      message(String(i), { metadata: { turnId: i % 2 ? 'odd' : 'even' } }),
    );
    await log.append(batch);

    expect(await log.rollbackTurn('s', 'odd')).toBe(10_000);
    const rest = await log.history('s');
    expect(rest.map((m) => m.content)).toEqual(
      batch.filter((_, i) => i % 2 === 0).map((m) => m.content),
    );
  });
});
