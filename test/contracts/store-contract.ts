import { randomUUID } from 'node:crypto';
import {
  ControlKinds,
  SessionNotFoundError,
  WellKnownMetadataKeys as K,
  type HistoryStore,
  type InputInbox,
  type Message,
  type MessageArchive,
  type NewMessage,
  type SessionStore,
} from '../../src';
import { describeInboxContract } from './store-contract.inbox';
import { describeSessionListingContract } from './store-contract.listing';
import { describeTextPolicyContract } from './store-contract.text';

/** The ports one adapter provides. */
export interface ContractPorts {
  history: HistoryStore;
  archive: MessageArchive;
  sessions: SessionStore;
  inbox: InputInbox;
}

/** The stores one adapter provides, and how to release them. */
export interface ContractStores extends ContractPorts {
  /**
   * Durable adapters: closes the stores and opens them again on the same database, as a
   * restarted server does; `cleanup` then releases the reopened ones.
   */
  restart?(): Promise<ContractPorts>;
  /** Releases connections and removes what the suite wrote. */
  cleanup(): Promise<void>;
}

/** What an adapter is, beyond the ports: `durable` ones keep their data across a restart. */
export interface ContractTraits {
  durable: boolean;
}

/** Role and content of each message, for compact order assertions. */
const shape = (messages: readonly Message[]) => messages.map((m) => `${m.role}:${m.content}`);

/**
 * The contract every `HistoryStore` + `MessageArchive` + `SessionStore` + `InputInbox` adapter
 * holds (P3, P4, U5, S6, S7, the inbox, the text policy, the session list). Adapter-agnostic: each test works on fresh random
 * session ids. `makeStores` is called before each test, `cleanup` after it. One test calls
 * `clear()` (all sessions): give a database adapter a database or schema of its own.
 */
export function describeHistoryContract(
  name: string,
  makeStores: () => Promise<ContractStores>,
  traits: ContractTraits = { durable: false },
): void {
  describe(`store contract: ${name}`, () => {
    let stores: ContractStores;
    let history: HistoryStore;
    let archive: MessageArchive;
    let sessions: SessionStore;
    let sid: string;

    beforeEach(async () => {
      stores = await makeStores();
      ({ history, archive, sessions } = stores);
      sid = `contract-${randomUUID()}`;
    });

    afterEach(async () => {
      await stores?.cleanup();
    });

    /** A new message of the test's session. */
    const msg = (
      role: Message['role'],
      content: string,
      extra: Partial<NewMessage> = {},
    ): NewMessage => ({ sessionId: sid, role, content, metadata: {}, ...extra });

    const marker = (turnId: string): NewMessage =>
      msg('system', '', {
        kind: ControlKinds.EventMarker,
        metadata: { [K.TurnId]: turnId, [K.TurnRecord]: { outcome: 'silent' } },
      });

    const stop = (content = 'stopped'): NewMessage =>
      msg('system', content, { kind: ControlKinds.TurnStopped });

    describe('MessageArchive.append', () => {
      it('returns the stored messages, in order, with ids and createdAt', async () => {
        const stored = await archive.append([
          msg('user', 'one'),
          msg('assistant', 'two'),
          msg('user', 'three'),
        ]);

        expect(shape(stored)).toEqual(['user:one', 'assistant:two', 'user:three']);
        for (const m of stored) {
          expect(typeof m.id).toBe('string');
          expect(m.id).not.toBe('');
          expect(m.sessionId).toBe(sid);
          expect(new Date(m.createdAt).toISOString()).toBe(m.createdAt);
        }
        expect(new Set(stored.map((m) => m.id)).size).toBe(3);
        const times = stored.map((m) => Date.parse(m.createdAt));
        expect([...times].sort((a, b) => a - b)).toEqual(times);
      });

      it('history returns appended messages oldest first, across appends', async () => {
        await archive.append([msg('user', 'a')]);
        await archive.append([msg('assistant', 'b'), msg('user', 'c')]);

        expect(shape(await history.history(sid))).toEqual(['user:a', 'assistant:b', 'user:c']);
      });

      it('keeps every persisted field: kind, toolCalls, toolCallId, reasoning, metadata', async () => {
        const call = {
          id: 'call_1',
          type: 'function' as const,
          function: { name: 'f', arguments: '{"x":1}' },
        };
        await archive.append([
          msg('assistant', '', {
            toolCalls: [call],
            reasoningContent: 'thinking',
            metadata: { [K.TurnId]: 't1', nested: { a: [1, 2] } },
          }),
          msg('tool', 'result', { toolCallId: 'call_1', metadata: { [K.CallId]: 'c1' } }),
          stop('note'),
        ]);

        const [group, result, stopMarker] = await history.history(sid);

        expect(group).toMatchObject({
          toolCalls: [call],
          reasoningContent: 'thinking',
          metadata: { [K.TurnId]: 't1', nested: { a: [1, 2] } },
        });
        expect(result).toMatchObject({ toolCallId: 'call_1', metadata: { [K.CallId]: 'c1' } });
        expect(stopMarker).toMatchObject({ role: 'system', kind: ControlKinds.TurnStopped });
      });

      it('a message with a key already stored is not written again; the stored one is returned', async () => {
        const key = `key-${randomUUID()}`;
        const [first] = await archive.append([msg('user', 'once', { key })]);

        const again = await archive.append([
          msg('user', 'once (retry)', { key }),
          msg('assistant', 'new'),
        ]);

        expect(again[0].id).toBe(first.id);
        expect(again[0].content).toBe('once');
        expect(shape(await history.history(sid))).toEqual(['user:once', 'assistant:new']);
      });

      it('returns copies: mutating a returned message or the input does not change the store', async () => {
        const input = msg('user', 'original', { metadata: { tag: 'a' } });
        const [stored] = await archive.append([input]);

        stored.content = 'mutated';
        stored.metadata.tag = 'mutated';
        input.content = 'mutated input';
        input.metadata.tag = 'mutated input';
        const [read] = await history.history(sid);
        read.metadata.tag = 'mutated read';

        const [reread] = await history.history(sid);
        expect(reread.content).toBe('original');
        expect(reread.metadata.tag).toBe('a');
      });
    });

    describe('HistoryStore.history', () => {
      it('U5: limit counts only conversation messages; control kinds within the window come along', async () => {
        await archive.append([
          msg('user', 'u1'),
          msg('assistant', 'a1'),
          marker('t1'),
          msg('user', 'u2'),
          stop(),
          msg('assistant', 'a2'),
        ]);

        expect(shape(await history.history(sid, { limit: 2 }))).toEqual([
          'user:u2',
          'system:stopped',
          'assistant:a2',
        ]);
        expect(shape(await history.history(sid, { limit: 3 }))).toEqual([
          'assistant:a1',
          'system:',
          'user:u2',
          'system:stopped',
          'assistant:a2',
        ]);
      });

      it('limit 0, absent or beyond the count returns everything', async () => {
        await archive.append([msg('user', 'u1'), marker('t1'), msg('assistant', 'a1')]);

        expect(await history.history(sid, { limit: 0 })).toHaveLength(3);
        expect(await history.history(sid)).toHaveLength(3);
        expect(await history.history(sid, { limit: 10 })).toHaveLength(3);
      });

      it('before pages back: only messages stored before that id, the limit counted among them; an id the session does not have gives none', async () => {
        const stored = await archive.append([
          msg('user', 'u1'),
          msg('assistant', 'a1'),
          marker('t1'),
          msg('user', 'u2'),
          msg('assistant', 'a2'),
        ]);
        const u2 = stored[3].id;

        expect(shape(await history.history(sid, { before: u2 }))).toEqual([
          'user:u1',
          'assistant:a1',
          'system:',
        ]);
        expect(shape(await history.history(sid, { before: u2, limit: 1 }))).toEqual([
          'assistant:a1',
          'system:',
        ]);
        expect(shape(await history.history(sid, { before: stored[0].id }))).toEqual([]);
        expect(await history.history(sid, { before: `missing-${randomUUID()}` })).toEqual([]);
        const other = `other-${randomUUID()}`;
        const [foreign] = await archive.append([{ ...msg('user', 'x'), sessionId: other }]);
        expect(await history.history(sid, { before: foreign.id })).toEqual([]);
      });

      it('an unknown session has an empty history and count 0', async () => {
        expect(await history.history(`missing-${randomUUID()}`)).toEqual([]);
        expect(await history.count(`missing-${randomUUID()}`)).toBe(0);
      });

      it('sessions do not see each other', async () => {
        const other = `${sid}-other`;
        await archive.append([msg('user', 'mine'), { ...msg('user', 'theirs'), sessionId: other }]);

        expect(shape(await history.history(sid))).toEqual(['user:mine']);
        expect(shape(await history.history(other))).toEqual(['user:theirs']);
        await history.deleteSession(other);
      });
    });

    describe('HistoryStore.count', () => {
      it('U5: counts active messages, control kinds excluded', async () => {
        await archive.append([
          msg('user', 'u1'),
          marker('t1'),
          msg('assistant', 'a1'),
          stop(),
          msg('tool', 'r', { toolCallId: 'x' }),
        ]);

        expect(await history.count(sid)).toBe(3);
      });
    });

    describe('HistoryStore.clear', () => {
      it('clears one session and leaves the others', async () => {
        const other = `${sid}-other`;
        await archive.append([msg('user', 'mine'), { ...msg('user', 'theirs'), sessionId: other }]);

        await history.clear(sid);

        expect(await history.history(sid)).toEqual([]);
        expect(await history.count(other)).toBe(1);
        await history.deleteSession(other);
      });

      it('without a session id clears every session', async () => {
        const other = `${sid}-other`;
        await archive.append([msg('user', 'mine'), { ...msg('user', 'theirs'), sessionId: other }]);

        await history.clear();

        expect(await history.count(sid)).toBe(0);
        expect(await history.count(other)).toBe(0);
      });
    });

    describe('HistoryStore.rollbackTurn', () => {
      it('P3: deletes exactly the messages whose metadata.turnId matches, and says how many', async () => {
        const other = `${sid}-other`;
        await archive.append([
          msg('user', 'kept before', { metadata: { [K.TurnId]: 't0' } }),
          msg('user', 'input', { metadata: { [K.TurnId]: 't1', [K.TurnEntry]: 'opened' } }),
          msg('assistant', 'reply', { metadata: { [K.TurnId]: 't1' } }),
          marker('t1'),
          msg('user', 'dropped input, no turn'),
          msg('user', 'kept after', { metadata: { [K.TurnId]: 't2' } }),
          {
            ...msg('user', 'other session, same turn id'),
            sessionId: other,
            metadata: { [K.TurnId]: 't1' },
          },
        ]);

        const removed = await history.rollbackTurn(sid, 't1');

        expect(removed).toBe(3);
        expect(shape(await history.history(sid))).toEqual([
          'user:kept before',
          'user:dropped input, no turn',
          'user:kept after',
        ]);
        expect(await history.count(other)).toBe(1);
        await history.deleteSession(other);
      });

      it('an unknown turn id removes nothing', async () => {
        await archive.append([msg('user', 'u', { metadata: { [K.TurnId]: 't1' } })]);

        expect(await history.rollbackTurn(sid, 'nope')).toBe(0);
        expect(await history.count(sid)).toBe(1);
      });
    });

    describe('HistoryStore.deleteSession', () => {
      it('removes everything of the session, control kinds too', async () => {
        await archive.append([msg('user', 'u'), marker('t1'), stop()]);

        await history.deleteSession(sid);

        expect(await history.history(sid)).toEqual([]);
      });
    });

    describe('SessionStore', () => {
      it('ensure creates settings with the defaults, and returns existing ones unchanged', async () => {
        expect(await sessions.get(sid)).toBeUndefined();

        const created = await sessions.ensure(sid, { historyLimit: 7, kind: 'room' });
        const again = await sessions.ensure(sid, { historyLimit: 99 });

        expect(created).toMatchObject({ sessionId: sid, historyLimit: 7, kind: 'room' });
        expect(again).toMatchObject({ sessionId: sid, historyLimit: 7, kind: 'room' });
        expect(await sessions.get(sid)).toMatchObject({ sessionId: sid, historyLimit: 7 });
      });

      it('ensure without defaults creates empty settings', async () => {
        expect(await sessions.ensure(sid)).toMatchObject({ sessionId: sid });
        expect(await sessions.get(sid)).toBeDefined();
      });

      it('S6: update merges the patch into existing settings', async () => {
        await sessions.ensure(sid, { historyLimit: 7 });

        const updated = await sessions.update(sid, {
          model: { provider: 'p', model: 'm' },
          think: true,
        });

        expect(updated).toMatchObject({
          sessionId: sid,
          historyLimit: 7,
          model: { provider: 'p', model: 'm' },
          think: true,
        });
        expect(await sessions.get(sid)).toMatchObject({
          model: { provider: 'p', model: 'm' },
          historyLimit: 7,
        });
      });

      it('S6: update replaces top-level fields whole; a field patched to undefined is gone, null stays', async () => {
        await sessions.ensure(sid, {
          model: { provider: 'p', model: 'm' },
          think: true,
          kind: 'room',
        });

        const updated = await sessions.update(sid, {
          model: { model: 'n' },
          think: undefined,
          historyLimit: null as never,
        });

        const expected = {
          sessionId: sid,
          model: { model: 'n' },
          kind: 'room',
          historyLimit: null,
        };
        expect(updated).toEqual(expected);
        expect(await sessions.get(sid)).toEqual(expected);
      });

      it('S6: concurrent updates of one session each merge into the settings, none is lost', async () => {
        await sessions.ensure(sid, { kind: 'room' });

        const fields = Array.from({ length: 12 }, (_, i) => `field${i}`);
        await Promise.all(fields.map((field, i) => sessions.update(sid, { [field]: i })));

        expect(await sessions.get(sid)).toEqual({
          sessionId: sid,
          kind: 'room',
          ...Object.fromEntries(fields.map((field, i) => [field, i])),
        });
      });

      it('S6: update of missing settings throws SessionNotFoundError and creates nothing', async () => {
        await expect(sessions.update(sid, { think: true })).rejects.toBeInstanceOf(
          SessionNotFoundError,
        );
        expect(await sessions.get(sid)).toBeUndefined();
      });

      it('update cannot move settings to another session id', async () => {
        await sessions.ensure(sid);

        await sessions.update(sid, { sessionId: 'hijack', think: true } as never);

        expect(await sessions.get(sid)).toMatchObject({ sessionId: sid, think: true });
        expect(await sessions.get('hijack')).toBeUndefined();
      });

      it('returns copies: mutating returned settings does not change the store', async () => {
        const created = await sessions.ensure(sid, { model: { model: 'm' } });
        created.model!.model = 'mutated';

        const read = await sessions.get(sid);
        read!.historyLimit = 1;

        expect(await sessions.get(sid)).toEqual({ sessionId: sid, model: { model: 'm' } });
      });

      it('delete removes the settings', async () => {
        await sessions.ensure(sid);

        await sessions.delete(sid);

        expect(await sessions.get(sid)).toBeUndefined();
        await expect(sessions.update(sid, {})).rejects.toBeInstanceOf(SessionNotFoundError);
      });

      it('S7: advanceGeneration moves the generation on, per session', async () => {
        const other = `${sid}-other`;
        const before = await sessions.generationOf(sid);
        const otherBefore = await sessions.generationOf(other);

        const next = await sessions.advanceGeneration(sid);

        expect(next).not.toBe(before);
        expect(await sessions.generationOf(sid)).toBe(next);
        expect(await sessions.generationOf(other)).toBe(otherBefore);
        const third = await sessions.advanceGeneration(sid);
        expect(new Set([before, next, third]).size).toBe(3);
      });

      it('S7: delete keeps the generation (a re-created session stays on the new one)', async () => {
        await sessions.ensure(sid);
        const advanced = await sessions.advanceGeneration(sid);

        await sessions.delete(sid);
        await sessions.ensure(sid);

        expect(await sessions.generationOf(sid)).toBe(advanced);
      });
    });

    describeInboxContract(
      () => stores,
      () => sid,
      traits,
    );
    describeTextPolicyContract(
      () => stores,
      () => sid,
    );
    describeSessionListingContract(
      () => stores,
      () => sid,
      traits,
    );
  });
}
