import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Client, Pool } from 'pg';
import {
  createSqlStores,
  FencedWriteError,
  WellKnownMetadataKeys as K,
  type NewMessage,
  type SqlStores,
  type WriteFencing,
} from '../../src';
import type { Database } from '../../src/session-bridge/sql/schema';
import { SqlSessionFences } from '../../src/session-bridge/sql/sql-fences';
import { closeAll, describePg, tempPgSchema, tempSqlite, type TempDb } from './sql-test-db';

/**
 * Distributed mode's fencing in the SQL stores: a turn's writes carry the fence of the lease
 * under which they are made, and the database refuses, whole, a write whose fence is older than
 * one it has seen (a takeover's claim, or a newer holder's write).
 */

/** Fences as a test sets them: per session, and per turn where a turn has its own. */
class TestFencing implements WriteFencing {
  readonly sessions = new Map<string, number>();
  readonly turns = new Map<string, number>();
  readonly asked: Array<[string, string | undefined]> = [];

  fenceFor(sessionId: string, turnId?: string): number | undefined {
    this.asked.push([sessionId, turnId]);
    return (
      (turnId !== undefined ? this.turns.get(turnId) : undefined) ?? this.sessions.get(sessionId)
    );
  }
}

const turnMessage = (sessionId: string, turnId: string, content: string): NewMessage => ({
  sessionId,
  role: 'assistant',
  content,
  metadata: { [K.TurnId]: turnId },
});

function fencingSuite(title: string, tempDb: () => TempDb | Promise<TempDb>) {
  describe(title, () => {
    let db: TempDb;
    const open: SqlStores[] = [];
    let fencing: TestFencing;
    let stores: SqlStores;
    let sid: string;

    beforeEach(async () => {
      db = await tempDb();
      fencing = new TestFencing();
      stores = await createSqlStores(db.url, { fencing });
      open.push(stores);
      sid = `s-${randomUUID()}`;
    });

    afterEach(async () => {
      await closeAll(open);
      await db.drop();
    });

    it('a session never fenced has fence 0; a claim records it, an older claim is refused', async () => {
      expect(await stores.fences.current(sid)).toBe(0);
      expect(await stores.fences.claim(sid, 3)).toBe(true);
      expect(await stores.fences.claim(sid, 3)).toBe(true);
      expect(await stores.fences.claim(sid, 2)).toBe(false);
      expect(await stores.fences.current(sid)).toBe(3);
      expect(await stores.fences.claim(sid, 7)).toBe(true);
      expect(await stores.fences.current(sid)).toBe(7);
    });

    it('a claim that need not wait for the disk (`flush: false`) grants and refuses as any claim, and later writes check it', async () => {
      expect(await stores.fences.claim(sid, 3, { flush: false })).toBe(true);
      expect(await stores.fences.claim(sid, 2, { flush: false })).toBe(false);
      expect(await stores.fences.current(sid)).toBe(3);
      expect(await stores.fences.claim(sid, 5, { flush: false })).toBe(true);
      fencing.sessions.set(sid, 4);
      await expect(stores.log.append([turnMessage(sid, 't1', 'x')])).rejects.toBeInstanceOf(
        FencedWriteError,
      );
      fencing.sessions.set(sid, 5);
      await stores.log.append([turnMessage(sid, 't1', 'y')]);
      expect((await stores.log.history(sid)).map((m) => m.content)).toEqual(['y']);
    });

    it('an append with the current fence is written and records the fence', async () => {
      fencing.sessions.set(sid, 4);
      await stores.log.append([turnMessage(sid, 't1', 'a')]);
      expect((await stores.log.history(sid)).map((m) => m.content)).toEqual(['a']);
      expect(await stores.fences.current(sid)).toBe(4);
      expect(fencing.asked).toContainEqual([sid, 't1']);
    });

    it('an append with a fence older than a claim is refused whole: nothing of it is written', async () => {
      fencing.sessions.set(sid, 1);
      await stores.log.append([turnMessage(sid, 't1', 'before')]);
      expect(await stores.fences.claim(sid, 2)).toBe(true);

      const refused = await stores.log
        .append([turnMessage(sid, 't1', 'x'), turnMessage(sid, 't1', 'y')])
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(FencedWriteError);
      expect(refused).toMatchObject({ sessionId: sid, fence: 1, current: 2 });
      expect((refused as Error).message).toContain('another instance holds the session now');
      expect((await stores.log.history(sid)).map((m) => m.content)).toEqual(['before']);
    });

    it("a turn's own fence is the one checked, not the session's", async () => {
      fencing.sessions.set(sid, 5);
      fencing.turns.set('old-turn', 4);
      await stores.fences.claim(sid, 5);
      await expect(stores.log.append([turnMessage(sid, 'old-turn', 'x')])).rejects.toBeInstanceOf(
        FencedWriteError,
      );
      await stores.log.append([turnMessage(sid, 'new-turn', 'y')]);
      expect((await stores.log.history(sid)).map((m) => m.content)).toEqual(['y']);
    });

    it('a write of a session without a fence is not checked', async () => {
      await stores.fences.claim(sid, 9);
      await stores.log.append([turnMessage(sid, 't1', 'unfenced')]);
      expect((await stores.log.history(sid)).map((m) => m.content)).toEqual(['unfenced']);
      expect(await stores.fences.current(sid)).toBe(9);
    });

    it('a rollback with an older fence is refused and removes nothing', async () => {
      fencing.sessions.set(sid, 1);
      await stores.log.append([turnMessage(sid, 't1', 'kept')]);
      await stores.fences.claim(sid, 2);
      await expect(stores.log.rollbackTurn(sid, 't1')).rejects.toBeInstanceOf(FencedWriteError);
      expect(await stores.log.count(sid)).toBe(1);
      fencing.sessions.set(sid, 2);
      expect(await stores.log.rollbackTurn(sid, 't1')).toBe(1);
    });

    it("the inbox's turn entry and settlement with an older fence are refused and change nothing", async () => {
      const id = `in-${randomUUID()}`;
      await stores.inbox.accept({ id, sessionId: sid, content: 'hello' });
      fencing.sessions.set(sid, 1);
      await stores.fences.claim(sid, 2);

      await expect(stores.inbox.enterTurn([id], 't1')).rejects.toBeInstanceOf(FencedWriteError);
      const settlement = { settled: 'turn', turnId: 't1', outcome: 'replied' } as const;
      await expect(stores.inbox.settle([id], settlement)).rejects.toBeInstanceOf(FencedWriteError);
      expect(await stores.inbox.get(id)).toEqual(
        expect.not.objectContaining({ turnId: expect.anything() }),
      );
      expect((await stores.inbox.get(id))?.settlement).toBeUndefined();

      fencing.sessions.set(sid, 2);
      await stores.inbox.enterTurn([id], 't1');
      await stores.inbox.settle([id], settlement);
      expect(await stores.inbox.get(id)).toMatchObject({ turnId: 't1', settlement });
    });

    it('accepting an input is never fenced: any instance may take one for any session', async () => {
      fencing.sessions.set(sid, 1);
      await stores.fences.claim(sid, 2);
      const { duplicate } = await stores.inbox.accept({
        id: `in-${randomUUID()}`,
        sessionId: sid,
        content: 'x',
      });
      expect(duplicate).toBe(false);
    });
  });
}

fencingSuite('SQL fencing: SQLite', tempSqlite);
describePg('SQL fencing: PostgreSQL', () => {
  fencingSuite('one pool', tempPgSchema);

  it('a claim with `flush: false` commits unflushed, and the next statement on its connection waits for the disk again', async () => {
    const db = await tempPgSchema();
    await (await createSqlStores(db.url)).close(); // the tables
    // One connection, so the statement after the claim runs where the claim ran.
    const sent: string[] = [];
    const kysely = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new Pool({ connectionString: db.url, max: 1 }) }),
      log: (event) => void sent.push(event.query.sql),
    });
    try {
      const setting = async () =>
        (
          await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(
            kysely,
          )
        ).rows[0].s;
      const fences = new SqlSessionFences(kysely, 'postgres');
      expect(await setting()).toBe('on');
      expect(await fences.claim('s', 1, { flush: false })).toBe(true);
      expect(sent.at(-1)).toContain("set_config('synchronous_commit', 'off', true)");
      expect(await setting()).toBe('on');
      expect(await fences.current('s')).toBe(1);
      // A claim that waits for the disk (the default) is the plain upsert.
      expect(await fences.claim('s', 2)).toBe(true);
      expect(sent.at(-1)).not.toContain('synchronous_commit');
      expect(await fences.claim('s', 2, { flush: false })).toBe(true); // the same fence again
      expect(await fences.claim('s', 1, { flush: false })).toBe(false);
      expect(await setting()).toBe('on');
    } finally {
      await kysely.destroy();
      await db.drop();
    }
  });

  describe('two instances on one database', () => {
    let db: TempDb;
    const open: SqlStores[] = [];

    beforeEach(async () => {
      db = await tempPgSchema();
    });

    afterEach(async () => {
      await closeAll(open);
      await db.drop();
    });

    it('once a takeover claimed its fence, no write of the previous holder lands, even one in flight', async () => {
      const sid = `s-${randomUUID()}`;
      const oldFencing = new TestFencing();
      oldFencing.sessions.set(sid, 1);
      const newFencing = new TestFencing();
      newFencing.sessions.set(sid, 2);
      const oldHolder = await createSqlStores(db.url, { fencing: oldFencing });
      const newHolder = await createSqlStores(db.url, { fencing: newFencing });
      open.push(oldHolder, newHolder);

      // The old holder writes as fast as it can while the new one claims the session.
      const writes = Array.from({ length: 40 }, (_, i) =>
        oldHolder.log.append([turnMessage(sid, 't-old', `old ${i}`)]).then(
          () => 'written',
          (error: unknown) => (error instanceof FencedWriteError ? 'fenced' : error),
        ),
      );
      const [granted, outcomes] = await Promise.all([
        newHolder.fences.claim(sid, 2),
        Promise.all(writes),
      ]);

      expect(granted).toBe(true);
      expect(outcomes.every((o) => o === 'written' || o === 'fenced')).toBe(true);
      // Every write the old holder was told landed is there; none that was refused is.
      const history = await newHolder.log.history(sid);
      const written = outcomes.filter((o) => o === 'written').length;
      expect(history).toHaveLength(written);
      await expect(
        oldHolder.log.append([turnMessage(sid, 't-old', 'late')]),
      ).rejects.toBeInstanceOf(FencedWriteError);
      await newHolder.log.append([turnMessage(sid, 't-new', 'new')]);
      expect((await newHolder.log.history(sid)).at(-1)?.content).toBe('new');
      expect(await newHolder.fences.current(sid)).toBe(2);
    });

    it("an input id reused for another session (after the first was deleted elsewhere) is still written by the new session's holder", async () => {
      const [first, second] = [`s-${randomUUID()}`, `s-${randomUUID()}`];
      const fencing = new TestFencing();
      fencing.sessions.set(first, 1);
      fencing.sessions.set(second, 1);
      const holder = await createSqlStores(db.url, { fencing });
      const other = await createSqlStores(db.url);
      open.push(holder, other);
      await holder.fences.claim(first, 1);
      await holder.fences.claim(second, 1);
      const id = `in-${randomUUID()}`;
      // The holder learns the id as the first session's.
      await holder.inbox.accept({ id, sessionId: first, content: 'one' });
      await other.inbox.deleteSession(first);
      await other.inbox.accept({ id, sessionId: second, content: 'two' });

      await holder.inbox.enterTurn([id], 't2');
      await holder.inbox.settle([id], { settled: 'turn', turnId: 't2', outcome: 'replied' });
      expect(await holder.inbox.get(id)).toMatchObject({
        sessionId: second,
        turnId: 't2',
        settlement: { settled: 'turn', outcome: 'replied' },
      });
    });

    /**
     * The holder's writes after its claim are one statement each, guarded by a shared lock on the
     * session's fence row. A claim that is under way (its transaction holds the row) makes them
     * wait; once it commits they find the newer fence and write nothing.
     */
    it('a write of the holder waits for a claim under way and is refused once it commits (append, turn entry, settlement)', async () => {
      const sid = `s-${randomUUID()}`;
      const fencing = new TestFencing();
      fencing.sessions.set(sid, 1);
      // Named, so that its connections waiting for the lock can be told apart from any other's.
      const name = `fence-test-${randomUUID()}`;
      const holder = await createSqlStores(`${db.url}&application_name=${name}`, { fencing });
      open.push(holder);
      const id = `in-${randomUUID()}`;
      await holder.inbox.accept({ id, sessionId: sid, content: 'hello' });
      expect(await holder.fences.claim(sid, 1)).toBe(true);
      await holder.log.append([turnMessage(sid, 't1', 'before')]);

      const claimer = new Client({ connectionString: db.url });
      await claimer.connect();
      try {
        await claimer.query('begin');
        await claimer.query('update session_fences set fence = 2 where session_id = $1', [sid]);
        const writes = [
          holder.log.append([turnMessage(sid, 't1', 'late')]),
          holder.inbox.enterTurn([id], 't1'),
          holder.inbox.settle([id], { settled: 'turn', turnId: 't1', outcome: 'replied' }),
        ].map((write) =>
          write.then(
            () => 'written',
            (error: unknown) => error,
          ),
        );
        await waitingForLocks(claimer, name, 3);
        await claimer.query('commit');
        for (const outcome of await Promise.all(writes)) {
          expect(outcome).toBeInstanceOf(FencedWriteError);
          expect(outcome).toMatchObject({ sessionId: sid, fence: 1, current: 2 });
        }
      } finally {
        await claimer.end();
      }
      expect((await holder.log.history(sid)).map((m) => m.content)).toEqual(['before']);
      expect(await holder.inbox.get(id)).toEqual(
        expect.not.objectContaining({ turnId: expect.anything() }),
      );
    });
  });
});

/** Resolves once `count` connections named `name` wait for a lock (asked through `client`). */
async function waitingForLocks(client: Client, name: string, count: number): Promise<void> {
  for (;;) {
    // Within the claim's transaction the statistics views would keep their first snapshot.
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>(
      "select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and application_name = $1",
      [name],
    );
    if (Number(rows[0].n) >= count) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
