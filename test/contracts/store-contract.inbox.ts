import { randomUUID } from 'node:crypto';
import type { IncomingMessage, InboxEntry, InputInbox, Settlement } from '../../src';
import type { ContractStores, ContractTraits } from './store-contract';

/** An input with its id, as the inbox accepts it. */
type Input = IncomingMessage & { id: string };

const ids = (entries: readonly InboxEntry[]) => entries.map((e) => e.id);

const replied = (turnId: string): Settlement => ({
  settled: 'turn',
  turnId,
  outcome: 'replied',
  reply: 'hi',
});

/**
 * The `InputInbox` part of the store contract: idempotent by id, the first settlement stays,
 * arrival order by seq, and (durable adapters) a restart keeps what is unsettled. Called inside
 * `describeHistoryContract`, whose `beforeEach` makes `current()` and `sessionId()` fresh.
 */
export function describeInboxContract(
  current: () => ContractStores,
  sessionId: () => string,
  traits: ContractTraits,
): void {
  describe('InputInbox', () => {
    let inbox: InputInbox;
    let sid: string;

    beforeEach(() => {
      inbox = current().inbox;
      sid = sessionId();
    });

    const input = (content: string, extra: Partial<Input> = {}): Input => ({
      id: `in-${randomUUID()}`,
      sessionId: sid,
      content,
      ...extra,
    });

    it('accept records the input as given, with seq and acceptedAt, unsettled', async () => {
      const message = input('hello', {
        platform: 'im',
        userId: 'u1',
        actor: { platform: 'im', userId: 'u1' },
        attachments: [{ kind: 'image', data: 'https://example.com/a.png', mimeType: 'image/png' }],
        metadata: { nested: { list: [1, 'two', null], flag: false } },
      });

      const { entry, duplicate } = await inbox.accept(message);

      expect(duplicate).toBe(false);
      expect(entry).toEqual({
        id: message.id,
        sessionId: sid,
        message,
        seq: expect.any(Number),
        acceptedAt: expect.any(String),
      });
      expect(new Date(entry.acceptedAt).toISOString()).toBe(entry.acceptedAt);
      expect(await inbox.get(message.id)).toEqual(entry);
    });

    it('a known id is not recorded again: the stored entry comes back with duplicate: true', async () => {
      const first = input('first');
      const { entry } = await inbox.accept(first);

      const again = await inbox.accept({ ...first, content: 'redelivered, changed' });

      expect(again).toEqual({ entry, duplicate: true });
      expect(ids(await inbox.unsettled(sid))).toEqual([first.id]);
    });

    it('concurrent accepts of one id record it once', async () => {
      const message = input('raced');

      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => inbox.accept({ ...message, content: `copy ${i}` })),
      );

      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      const winner = results.find((r) => !r.duplicate)!.entry;
      for (const r of results) expect(r.entry).toEqual(winner);
      expect(await inbox.unsettled(sid)).toEqual([winner]);
    });

    it('accepts made together are numbered in call order, all kept; a repeat among them is a duplicate', async () => {
      const other = `${sid}-together`;
      const messages = Array.from({ length: 650 }, (_, i) =>
        input(`burst ${i}`, i % 3 === 0 ? { sessionId: other } : {}),
      );
      const repeat = { ...messages[10], content: 'the same id again' };

      const results = await Promise.all([...messages, repeat].map((m) => inbox.accept(m)));

      const seqs = results.slice(0, messages.length).map((r) => r.entry.seq);
      expect(seqs.every((seq, i) => i === 0 || seq > seqs[i - 1])).toBe(true);
      expect(results.slice(0, messages.length).every((r) => !r.duplicate)).toBe(true);
      expect(results[messages.length]).toEqual({ entry: results[10].entry, duplicate: true });
      expect(results[10].entry.message.content).toBe('burst 10');
      const mine = messages.filter((m) => m.sessionId === sid).map((m) => m.id);
      expect(ids(await inbox.unsettled(sid))).toEqual(mine);
      expect(await inbox.unsettled(other)).toHaveLength(messages.length - mine.length);
      await inbox.deleteSession(other);
    });

    it('a duplicate of a settled input comes back with its settlement', async () => {
      const message = input('done');
      await inbox.accept(message);
      await inbox.enterTurn([message.id], 't1');
      await inbox.settle([message.id], replied('t1'));

      const { entry, duplicate } = await inbox.accept(message);

      expect(duplicate).toBe(true);
      expect(entry).toMatchObject({ turnId: 't1', settlement: replied('t1') });
    });

    it('settle keeps the first settlement; settled entries leave unsettled()', async () => {
      const [a, b] = [input('a'), input('b')];
      await inbox.accept(a);
      await inbox.accept(b);

      await inbox.settle([a.id], { settled: 'dropped', reason: 'queue-full' });
      await inbox.settle([a.id, b.id], { settled: 'discarded' });
      await inbox.settle([b.id], replied('late'));

      expect((await inbox.get(a.id))?.settlement).toEqual({
        settled: 'dropped',
        reason: 'queue-full',
      });
      expect((await inbox.get(b.id))?.settlement).toEqual({ settled: 'discarded' });
      expect(await inbox.unsettled(sid)).toEqual([]);
    });

    it('unsettled: arrival order by seq, of one session or of all', async () => {
      const other = `${sid}-other`;
      const accepted: InboxEntry[] = [];
      for (const message of [
        input('1'),
        input('2', { sessionId: other }),
        input('3'),
        input('4', { sessionId: other }),
        input('5'),
      ]) {
        accepted.push((await inbox.accept(message)).entry);
      }
      await inbox.settle([accepted[2].id], { settled: 'discarded' });

      const seqs = accepted.map((e) => e.seq);
      expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
      expect(new Set(seqs).size).toBe(seqs.length);
      expect(ids(await inbox.unsettled(sid))).toEqual([accepted[0].id, accepted[4].id]);
      expect(ids(await inbox.unsettled(other))).toEqual([accepted[1].id, accepted[3].id]);
      expect(ids(await inbox.unsettled())).toEqual([0, 1, 3, 4].map((i) => accepted[i].id));
      await inbox.deleteSession(other);
    });

    it('enterTurn records the turn of unsettled entries; a settled entry keeps its own', async () => {
      const [a, b, c] = [input('a'), input('b'), input('c')];
      for (const m of [a, b, c]) await inbox.accept(m);
      await inbox.enterTurn([a.id], 't1');
      await inbox.settle([a.id], replied('t1'));

      await inbox.enterTurn([a.id, b.id, c.id], 't2');

      expect((await inbox.get(a.id))?.turnId).toBe('t1');
      expect((await inbox.unsettled(sid)).map((e) => e.turnId)).toEqual(['t2', 't2']);
    });

    it('unknown ids and empty lists change nothing; an unknown id reads undefined', async () => {
      const a = input('a');
      await inbox.accept(a);

      await inbox.settle([], replied('t'));
      await inbox.enterTurn([], 't');
      await inbox.settle([`missing-${randomUUID()}`], replied('t'));
      await inbox.enterTurn([`missing-${randomUUID()}`], 't');

      expect(await inbox.get(`missing-${randomUUID()}`)).toBeUndefined();
      expect(await inbox.unsettled(sid)).toEqual([(await inbox.accept(a)).entry]);
    });

    it('prune forgets entries settled before the time, never unsettled ones', async () => {
      const [settled, waiting] = [input('settled'), input('waiting')];
      await inbox.accept(settled);
      await inbox.accept(waiting);
      await inbox.settle([settled.id], replied('t1'));

      expect(await inbox.prune('1970-01-01T00:00:00.000Z')).toBe(0);
      expect(await inbox.get(settled.id)).toBeDefined();

      expect(await inbox.prune('9999-12-31T23:59:59.999Z')).toBe(1);
      expect(await inbox.get(settled.id)).toBeUndefined();
      expect(await inbox.get(waiting.id)).toBeDefined();
    });

    it('seq keeps growing after the newest entry is pruned', async () => {
      const first = input('first');
      const { entry } = await inbox.accept(first);
      await inbox.settle([first.id], { settled: 'discarded' });
      await inbox.prune('9999-12-31T23:59:59.999Z');

      const { entry: next } = await inbox.accept(input('next'));

      expect(next.seq).toBeGreaterThan(entry.seq);
    });

    it('deleteSession forgets every entry of the session, settled or not, and only those', async () => {
      const other = `${sid}-other`;
      const [a, b, theirs] = [input('a'), input('b'), input('theirs', { sessionId: other })];
      for (const m of [a, b, theirs]) await inbox.accept(m);
      await inbox.settle([a.id], replied('t1'));

      await inbox.deleteSession(sid);

      expect(await inbox.get(a.id)).toBeUndefined();
      expect(await inbox.unsettled(sid)).toEqual([]);
      expect(ids(await inbox.unsettled(other))).toEqual([theirs.id]);
      // The id is free again: a new acceptance records it anew.
      expect((await inbox.accept(a)).duplicate).toBe(false);
      await inbox.deleteSession(other);
    });

    it('returns copies: mutating a returned entry or the input does not change the store', async () => {
      const message = input('original', { metadata: { tag: 'a' } });
      const { entry } = await inbox.accept(message);

      entry.message.content = 'mutated';
      message.metadata!.tag = 'mutated input';
      const read = await inbox.get(message.id);
      read!.message.metadata!.tag = 'mutated read';

      expect((await inbox.get(message.id))?.message).toMatchObject({
        content: 'original',
        metadata: { tag: 'a' },
      });
    });

    if (traits.durable) {
      it('a restart keeps the unsettled entries in order, with their turn; ids stay known', async () => {
        const [a, b, c] = [input('a'), input('b'), input('c')];
        for (const m of [a, b, c]) await inbox.accept(m);
        await inbox.enterTurn([a.id], 't1');
        await inbox.settle([b.id], replied('t0'));
        const before = await inbox.unsettled(sid);

        const reopened = (await current().restart!()).inbox;

        expect(await reopened.unsettled(sid)).toEqual(before);
        expect(ids(before)).toEqual([a.id, c.id]);
        expect(before[0].turnId).toBe('t1');
        expect((await reopened.get(b.id))?.settlement).toEqual(replied('t0'));
        expect((await reopened.accept(a)).duplicate).toBe(true);
        const { entry: d } = await reopened.accept(input('d'));
        expect(d.seq).toBeGreaterThan(Math.max(...before.map((e) => e.seq)));
      });
    }
  });
}
