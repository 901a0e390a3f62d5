import { ControlKinds, WellKnownMetadataKeys as K, type NewMessage } from '../../src';
import type { ContractStores } from './store-contract';

/** Text no store can keep as is: U+0000, a lone high surrogate, a lone low surrogate. */
const NUL = '\u0000';
const HIGH = '\uD83D';
const LOW = '\uDE00';
const EMOJI = '\u{1F600}';
/** What every store keeps instead (one per code unit). */
const R = '\uFFFD';

/**
 * The text policy part of the store contract (`normaliseText`): every adapter keeps and returns
 * exactly the same text, U+0000 and lone surrogates as U+FFFD, valid pairs unchanged, also in
 * ids. Called inside `describeHistoryContract`, whose `beforeEach` makes `current()` and
 * `sessionId()` fresh.
 */
export function describeTextPolicyContract(
  current: () => ContractStores,
  sessionId: () => string,
): void {
  describe('text policy', () => {
    let stores: ContractStores;
    let sid: string;

    beforeEach(() => {
      stores = current();
      sid = sessionId();
    });

    it('a message keeps its text normalised: content, reasoning, tool calls, metadata, key', async () => {
      const input: NewMessage = {
        sessionId: sid,
        role: 'assistant',
        content: `nul${NUL} high${HIGH} low${LOW} pair${EMOJI}`,
        reasoningContent: `think${HIGH}`,
        toolCalls: [
          {
            id: `call${NUL}`,
            type: 'function',
            function: { name: `f${LOW}`, arguments: `{"q":"${NUL}${EMOJI}"}` },
          },
        ],
        metadata: {
          [`k${NUL}`]: `v${HIGH}`,
          nested: [`${LOW}x`, { [EMOJI]: EMOJI }],
          // Values of the kinds a memory store shares between messages, with text to normalise.
          model: { provider: `p${NUL}`, model: 'm' },
          tokenCount: { [`enc${LOW}`]: 3 },
        },
        key: `key-${sid}${NUL}`,
      };
      const expected = {
        content: `nul${R} high${R} low${R} pair${EMOJI}`,
        reasoningContent: `think${R}`,
        toolCalls: [
          {
            id: `call${R}`,
            type: 'function',
            function: { name: `f${R}`, arguments: `{"q":"${R}${EMOJI}"}` },
          },
        ],
        metadata: {
          [`k${R}`]: `v${R}`,
          nested: [`${R}x`, { [EMOJI]: EMOJI }],
          model: { provider: `p${R}`, model: 'm' },
          tokenCount: { [`enc${R}`]: 3 },
        },
        key: `key-${sid}${R}`,
      };

      const [stored] = await stores.archive.append([input]);
      const [reread] = await stores.history.history(sid);

      expect(stored).toMatchObject(expected);
      expect(reread).toEqual(stored);
      // The normalised key is the key: a retry with the raw one finds the stored message.
      const [retry] = await stores.archive.append([{ ...input, content: 'retry' }]);
      expect(retry.id).toBe(stored.id);
    });

    it('a session id with U+0000 is stored normalised and found by either spelling', async () => {
      const raw = `${sid}${NUL}x${HIGH}`;
      const normal = `${sid}${R}x${R}`;
      const turn = `t${NUL}1`;

      const [stored] = await stores.archive.append([
        { sessionId: raw, role: 'user', content: 'hi', metadata: { [K.TurnId]: turn } },
        {
          sessionId: raw,
          role: 'system',
          content: '',
          kind: ControlKinds.EventMarker,
          metadata: { [K.TurnId]: turn },
        },
        { sessionId: raw, role: 'assistant', content: 'kept', metadata: {} },
      ]);

      expect(stored.sessionId).toBe(normal);
      expect(await stores.history.history(raw)).toEqual(await stores.history.history(normal));
      expect(await stores.history.count(raw)).toBe(2);
      expect(await stores.history.rollbackTurn(raw, turn)).toBe(2);
      expect((await stores.history.history(normal)).map((m) => m.content)).toEqual(['kept']);
      await stores.history.clear(raw);
      expect(await stores.history.count(normal)).toBe(0);
      await stores.archive.append([{ sessionId: raw, role: 'user', content: 'x', metadata: {} }]);
      await stores.history.deleteSession(raw);
      expect(await stores.history.history(normal)).toEqual([]);
    });

    it('session settings: id and settings normalised, found by either spelling', async () => {
      const raw = `${sid}${NUL}`;
      const normal = `${sid}${R}`;

      const created = await stores.sessions.ensure(raw, { model: { model: `m${LOW}` } });
      const updated = await stores.sessions.update(raw, { kind: `room${NUL}` });

      expect(created).toEqual({ sessionId: normal, model: { model: `m${R}` } });
      expect(updated).toEqual({ sessionId: normal, model: { model: `m${R}` }, kind: `room${R}` });
      expect(await stores.sessions.get(raw)).toEqual(updated);
      expect(await stores.sessions.get(normal)).toEqual(updated);
      if (stores.sessions.list) expect(await stores.sessions.list()).toContain(normal);
      const generation = await stores.sessions.advanceGeneration(raw);
      expect(await stores.sessions.generationOf(normal)).toBe(generation);
      await stores.sessions.delete(raw);
      expect(await stores.sessions.get(normal)).toBeUndefined();
    });

    it('the inbox keeps the input and its settlement normalised; ids match by either spelling', async () => {
      const rawSid = `${sid}${NUL}`;
      const id = `in-${sid}${HIGH}`;
      const normalId = `in-${sid}${R}`;

      const { entry } = await stores.inbox.accept({
        id,
        sessionId: rawSid,
        content: `c${NUL}${EMOJI}`,
        metadata: { [`k${LOW}`]: [NUL] },
      });
      await stores.inbox.enterTurn([id], `t${NUL}`);

      expect(entry).toMatchObject({
        id: normalId,
        sessionId: `${sid}${R}`,
        message: {
          id: normalId,
          sessionId: `${sid}${R}`,
          content: `c${R}${EMOJI}`,
          metadata: { [`k${R}`]: [R] },
        },
      });
      expect((await stores.inbox.accept({ id, sessionId: rawSid, content: '' })).duplicate).toBe(
        true,
      );
      const [waiting] = await stores.inbox.unsettled(rawSid);
      expect(waiting).toEqual({ ...entry, turnId: `t${R}` });

      await stores.inbox.settle([id], {
        settled: 'turn',
        turnId: `t${NUL}`,
        outcome: 'replied',
        reply: `r${LOW}`,
      });

      expect((await stores.inbox.get(normalId))?.settlement).toEqual({
        settled: 'turn',
        turnId: `t${R}`,
        outcome: 'replied',
        reply: `r${R}`,
      });
      await stores.inbox.deleteSession(rawSid);
      expect(await stores.inbox.get(id)).toBeUndefined();
    });
  });
}
