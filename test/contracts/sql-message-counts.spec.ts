import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { sql, type Kysely } from 'kysely';
import {
  CONTROL_KINDS,
  ControlKinds,
  createSqlStores,
  FencedWriteError,
  WellKnownMetadataKeys as K,
  type NewMessage,
  type SqlStores,
  type WriteFencing,
} from '../../src';
import { openDatabase, type Database } from '../../src/session-bridge';
import { describePg, migratorOf, tempPgSchema, tempSqlite, type TempDb } from './sql-test-db';

/**
 * U5's history count on the SQL stores is a row per session kept by triggers on `messages`
 * (migration 0005): `count()` no longer reads the session's messages, so it must stay equal to
 * them through every kind of write, and start equal on a database that had messages before.
 */

const SESSIONS = ['a', 'b', 'c'];
const KINDS = [undefined, undefined, 'summary', ControlKinds.EventMarker, ControlKinds.TurnStopped];

/** What the test does, one step at a time. */
type Step =
  | { op: 'append'; session: number; kinds: number[]; turn: number; key?: number }
  | { op: 'rollback'; session: number; turn: number }
  | { op: 'clear'; session?: number }
  | { op: 'delete'; session: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        op: fc.constant('append' as const),
        session: fc.nat(2),
        kinds: fc.array(fc.nat(KINDS.length - 1), { minLength: 1, maxLength: 4 }),
        turn: fc.nat(3),
        key: fc.nat(4),
      },
      { requiredKeys: ['op', 'session', 'kinds', 'turn'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('rollback' as const),
      session: fc.nat(2),
      turn: fc.nat(3),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record(
      { op: fc.constant('clear' as const), session: fc.nat(2) },
      { requiredKeys: ['op'] },
    ),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), session: fc.nat(2) }) },
);

/** The messages of an append step: a keyed step repeats its key on its first message. */
function messagesOf(prefix: string, s: Extract<Step, { op: 'append' }>): NewMessage[] {
  return s.kinds.map((k, i) => {
    const message: NewMessage = {
      sessionId: `${prefix}${SESSIONS[s.session]}`,
      role: i % 2 ? 'assistant' : 'user',
      content: `m${i}`,
      metadata: { [K.TurnId]: `t${s.turn}` },
    };
    if (KINDS[k] !== undefined) message.kind = KINDS[k];
    if (i === 0 && s.key !== undefined) message.key = `${prefix}k${s.key}`;
    return message;
  });
}

async function apply(stores: SqlStores, prefix: string, s: Step): Promise<void> {
  const id = (n: number) => `${prefix}${SESSIONS[n]}`;
  if (s.op === 'append') await stores.log.append(messagesOf(prefix, s));
  else if (s.op === 'rollback') await stores.log.rollbackTurn(id(s.session), `t${s.turn}`);
  else if (s.op === 'delete') await stores.log.deleteSession(id(s.session));
  else await stores.log.clear(s.session === undefined ? undefined : id(s.session));
}

/** Each session's count as kept against its conversation messages as read. */
async function expectCountsTrue(stores: SqlStores, prefix: string): Promise<void> {
  for (const name of SESSIONS) {
    const sessionId = `${prefix}${name}`;
    const read = (await stores.log.history(sessionId)).filter(
      (m) => m.kind !== ControlKinds.EventMarker && m.kind !== ControlKinds.TurnStopped,
    ).length;
    expect(await stores.log.count(sessionId)).toBe(read);
  }
}

/**
 * The sessions whose last step emptied them (a clear of it or of all, its deletion): they must
 * have no count row. An append makes its session's row unknown again (it may add none).
 */
function trackEmptied(emptied: Set<string>, prefix: string, s: Step): void {
  const id = (n: number) => `${prefix}${SESSIONS[n]}`;
  if (s.op === 'append') emptied.delete(id(s.session));
  else if (s.op === 'delete') emptied.add(id(s.session));
  else if (s.op === 'clear') {
    for (const n of s.session === undefined ? [0, 1, 2] : [s.session]) emptied.add(id(n));
  }
}

/** The count rows of `sessionIds` that exist. */
async function countRowsOf(db: Kysely<Database>, sessionIds: string[]): Promise<string[]> {
  if (sessionIds.length === 0) return [];
  const rows = await db
    .selectFrom('message_counts')
    .select('session_id')
    .where('session_id', 'in', sessionIds)
    .execute();
  return rows.map((row) => row.session_id);
}

/** A store's database at migration 0004 with messages of two sessions, then migrated on. */
async function migratedWithMessages(url: string): Promise<SqlStores> {
  const opened = await openDatabase(url);
  try {
    const migrator = await migratorOf(opened);
    expect((await migrator.migrateTo('0004_session_fences')).error).toBeUndefined();
    const rows: [string, string | null][] = [
      ['old-1', null],
      ['old-1', null],
      ['old-1', ControlKinds.EventMarker],
      ['old-1', 'summary'],
      ['old-2', ControlKinds.TurnStopped],
      ['old-2', null],
    ];
    for (const [sessionId, kind] of rows) {
      await sql`insert into messages (id, session_id, role, kind, content, metadata, created_at)
        values (${randomUUID()}, ${sessionId}, 'user', ${kind}, 'x', '{}', '2020-01-01T00:00:00.000Z')`.execute(
        opened.db,
      );
    }
  } finally {
    await opened.close();
  }
  return createSqlStores(url);
}

/** Runs `test` on stores over a throwaway database, made by `open`; closes and drops both. */
async function withStores(
  tempDb: () => TempDb | Promise<TempDb>,
  open: (url: string) => Promise<SqlStores>,
  test: (stores: SqlStores) => Promise<void>,
): Promise<void> {
  const db = await tempDb();
  try {
    const stores = await open(db.url);
    await test(stores).finally(() => stores.close());
  } finally {
    await db.drop();
  }
}

function countSuite(title: string, tempDb: () => TempDb | Promise<TempDb>) {
  describe(title, () => {
    it('U5: count() equals the conversation messages through appends (keys repeated, control kinds), rollbacks, clears and deletions; a cleared or deleted session keeps no count row', () => {
      let url = '';
      const open = (dbUrl: string) => ((url = dbUrl), createSqlStores(dbUrl));
      return withStores(tempDb, open, async (stores) => {
        const raw = await openDatabase(url);
        try {
          let run = 0;
          await fc.assert(
            fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
              const prefix = `r${run++}-`;
              const emptied = new Set<string>();
              for (const s of steps) {
                await apply(stores, prefix, s);
                await expectCountsTrue(stores, prefix);
                trackEmptied(emptied, prefix, s);
                expect(await countRowsOf(raw.db, [...emptied])).toEqual([]);
              }
            }),
            { numRuns: 25, seed: 20261206 },
          );
        } finally {
          await raw.close();
        }
      });
    });

    it('U5: a database with messages from before the kept counts starts with them counted', () =>
      withStores(tempDb, migratedWithMessages, async (stores) => {
        expect(await stores.log.count('old-1')).toBe(3);
        expect(await stores.log.count('old-2')).toBe(1);
        await stores.log.append([{ sessionId: 'old-2', role: 'user', content: 'y', metadata: {} }]);
        expect(await stores.log.count('old-2')).toBe(2);
      }));
  });
}

describe('SQL stores: kept history counts', () => {
  it('U5: the count triggers know every control kind (a new one needs a migration that replaces them)', () => {
    // Migration 0005 writes these into its triggers; CONTROL_KINDS growing must fail here.
    expect([...CONTROL_KINDS].sort()).toEqual(['event-marker', 'turn-stopped']);
  });
});

countSuite('SQL stores: kept history counts on sqlite', tempSqlite);
describePg('SQL stores: kept history counts on postgres', () => {
  countSuite('one statement per write', tempPgSchema);

  it("U5: a fenced append (distributed mode's guarded statement) counts; a refused one does not", () => {
    const fences = new Map<string, number>();
    const fencing: WriteFencing = { fenceFor: (sessionId) => fences.get(sessionId) };
    const open = (url: string) => createSqlStores(url, { fencing });
    return withStores(tempPgSchema, open, async (stores) => {
      const sid = `s-${randomUUID()}`;
      expect(await stores.fences.claim(sid, 2)).toBe(true);
      fences.set(sid, 2);
      const turn = (content: string, kind?: string): NewMessage => ({
        sessionId: sid,
        role: 'assistant',
        content,
        metadata: { [K.TurnId]: 't1' },
        ...(kind ? { kind } : {}),
      });
      await stores.log.append([turn('a'), turn('b'), turn('marker', ControlKinds.EventMarker)]);
      expect(await stores.log.count(sid)).toBe(2);
      expect(await stores.fences.claim(sid, 3)).toBe(true);
      await expect(stores.log.append([turn('late')])).rejects.toBeInstanceOf(FencedWriteError);
      expect(await stores.log.count(sid)).toBe(2);
    });
  });
});
