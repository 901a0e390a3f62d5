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

  it('readonlyHistory gives the stored records themselves: frozen, equal to what history gives', async () => {
    const log = new MemoryMessageLog();
    await log.append([message('a'), message('b')]);

    const records = await log.readonlyHistory('s', { limit: 1 });
    const copies = await log.history('s', { limit: 1 });

    expect(records).toEqual(copies);
    expect(records.map((m) => m.content)).toEqual(['b']);
    expect(Object.isFrozen(records[0])).toBe(true);
    expect(Object.isFrozen(records[0].metadata)).toBe(true);
    expect(() => {
      (records[0] as { content: string }).content = 'changed';
    }).toThrow(TypeError);
    expect((await log.readonlyHistory('s'))[1]).toBe(records[0]);
  });

  it('token counts, model references and outcome-only turn records are shared between records; values with words of the user are not', async () => {
    const log = new MemoryMessageLog();
    const meta = (i: number) => ({
      turnId: `t${i}`,
      tokenCount: { o200k_base: 12 },
      model: { provider: 'p', model: 'm' },
      turnRecord: { outcome: 'replied' },
      failure: { outcome: 'error', error: `secret ${i}` },
    });
    await log.append([message('a', { metadata: meta(1) }), message('b', { metadata: meta(2) })]);

    const [a, b] = await log.readonlyHistory('s');

    expect(a.metadata.tokenCount).toBe(b.metadata.tokenCount);
    expect(a.metadata.model).toBe(b.metadata.model);
    expect(a.metadata.turnRecord).toBe(b.metadata.turnRecord);
    expect(a.metadata.failure).not.toBe(b.metadata.failure);
    expect(b.metadata).toEqual(meta(2));
    expect(Object.isFrozen(a.metadata.tokenCount)).toBe(true);
  });

  it('a turn record carrying an error is kept per record, not shared', async () => {
    const log = new MemoryMessageLog();
    const record = (error: string) =>
      message('x', { metadata: { turnRecord: { outcome: 'error', error } } });
    await log.append([record('same'), record('same')]);

    const [a, b] = await log.readonlyHistory('s');

    expect(a.metadata.turnRecord).toEqual({ outcome: 'error', error: 'same' });
    expect(a.metadata.turnRecord).not.toBe(b.metadata.turnRecord);
  });

  it('creation times are ISO texts, strictly increasing, many within one millisecond', async () => {
    const log = new MemoryMessageLog();
    const stored = await log.append(Array.from({ length: 3000 }, (_, i) => message(`m${i}`)));

    for (let i = 0; i < stored.length; i++) {
      const { createdAt } = stored[i];
      expect(new Date(createdAt).toISOString()).toBe(createdAt);
      if (i > 0) expect(createdAt > stored[i - 1].createdAt).toBe(true);
    }
  });

  it('keeps every field as given, also one named like an Object.prototype member, and a missing metadata reads as empty', async () => {
    const log = new MemoryMessageLog();
    const odd = { ...message('x'), constructor: 'field', toString: 'too' } as NewMessage;
    const bare = { sessionId: 's', role: 'user', content: 'y' } as NewMessage;
    await log.append([odd, bare]);

    const [first, second] = await log.history('s');

    expect(Object.hasOwn(first, 'constructor')).toBe(true);
    expect(first).toMatchObject({ constructor: 'field', toString: 'too', content: 'x' });
    expect(second.metadata).toEqual({});
  });
});
