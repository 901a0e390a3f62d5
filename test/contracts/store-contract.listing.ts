import fc from 'fast-check';
import type { SessionActivity, SessionActivityKey, SessionStore } from '../../src';
import type { ContractStores, ContractTraits } from './store-contract';

/** A time of the test's own far future: after anything the clock gives while the suite runs. */
const at = (second: number) => new Date(Date.UTC(2999, 0, 1, 0, 0, second)).toISOString();

/** Ids and times of a listing, for compact order assertions. */
const shape = (rows: readonly SessionActivity[]) =>
  rows.map((r) => `${r.settings.sessionId}@${r.activeAt.slice(17, 19)}`);

const keyOf = (row: SessionActivity): SessionActivityKey => ({
  activeAt: row.activeAt,
  sessionId: row.settings.sessionId,
});

/** Every page of the listing, `limit` at a time, each after the last row of the page before. */
async function allPages(sessions: SessionStore, limit: number): Promise<SessionActivity[][]> {
  const pages: SessionActivity[][] = [];
  let after: SessionActivityKey | undefined;
  for (;;) {
    const page = await sessions.listByActivity!({ limit, ...(after ? { after } : {}) });
    if (page.length) pages.push(page);
    if (page.length < limit) return pages;
    after = keyOf(page[page.length - 1]);
  }
}

/**
 * The session list part of the store contract (`SessionStore.listByActivity` and the activity
 * that `ensure` with `activeAt` and `update` with an ended `lastTurn` record). Called inside
 * `describeHistoryContract`, whose `beforeEach` makes `current()` and `sessionId()` fresh (a
 * store of its own per test: the listing sees only the test's sessions).
 */
export function describeSessionListingContract(
  current: () => ContractStores,
  sessionId: () => string,
  traits: ContractTraits,
): void {
  describe('SessionStore.listByActivity', () => {
    let stores: ContractStores;
    let sessions: SessionStore;
    let sid: string;

    beforeEach(() => {
      stores = current();
      sessions = stores.sessions;
      sid = sessionId();
    });

    /** Sessions `${sid}-<name>` with settings, each accepted an input at its own second. */
    const seed = async (activity: Record<string, number>) => {
      for (const [name, second] of Object.entries(activity)) {
        await sessions.ensure(`${sid}-${name}`, {}, { activeAt: at(second) });
      }
    };
    const ids = (rows: readonly SessionActivity[]) =>
      rows.map((r) => r.settings.sessionId.slice(sid.length + 1));

    it('lists sessions with settings, most recent activity first, equal times by id descending', async () => {
      await seed({ a: 10, b: 30, c: 20, d: 20 });
      await sessions.update(`${sid}-c`, { think: true, model: { model: 'm' } });

      const rows = await sessions.listByActivity!({ limit: 10 });

      expect(ids(rows)).toEqual(['b', 'd', 'c', 'a']);
      expect(rows.map((r) => r.activeAt)).toEqual([at(30), at(20), at(20), at(10)]);
      expect(rows[2].settings).toEqual({
        sessionId: `${sid}-c`,
        think: true,
        model: { model: 'm' },
      });
    });

    it('limit and after page through every session once, in order, ties split across pages', async () => {
      await seed({ a: 1, b: 2, c: 2, d: 2, e: 3, f: 4, g: 5 });

      const pages = await allPages(sessions, 2);

      expect(pages.map(ids)).toEqual([['g', 'f'], ['e', 'd'], ['c', 'b'], ['a']]);
      expect(await sessions.listByActivity!({ limit: 3, after: keyOf(pages[3][0]) })).toEqual([]);
    });

    it('an accepted input moves the activity on, never back, and leaves the settings unchanged', async () => {
      await sessions.ensure(sid, { historyLimit: 4 }, { activeAt: at(10) });

      const again = await sessions.ensure(sid, { historyLimit: 99 }, { activeAt: at(20) });
      await sessions.ensure(sid, {}, { activeAt: at(15) });

      expect(again).toEqual({ sessionId: sid, historyLimit: 4 });
      expect(await sessions.get(sid)).toEqual({ sessionId: sid, historyLimit: 4 });
      expect(shape(await sessions.listByActivity!({ limit: 5 }))).toEqual([`${sid}@20`]);
    });

    it('an ended turn (lastTurn with endedAt) moves the activity; other updates do not', async () => {
      await seed({ a: 10, b: 20 });

      await sessions.update(`${sid}-a`, {
        lastTurn: { turnId: 't1', outcome: 'replied', endedAt: at(30) },
      });
      expect(ids(await sessions.listByActivity!({ limit: 5 }))).toEqual(['a', 'b']);

      await sessions.update(`${sid}-b`, { think: true, historyLimit: 3 });
      await sessions.update(`${sid}-a`, { lastTurn: { turnId: 't0', outcome: 'error' } });
      const rows = await sessions.listByActivity!({ limit: 5 });

      expect(shape(rows)).toEqual([`${sid}-a@30`, `${sid}-b@20`]);
      expect(rows[0].settings.lastTurn).toEqual({ turnId: 't0', outcome: 'error' });
    });

    it('settings made without activity are listed at the time they were created', async () => {
      const before = new Date().toISOString();
      await sessions.ensure(sid, { think: false });
      const after = new Date().toISOString();

      const [row] = await sessions.listByActivity!({ limit: 5 });

      expect(row.settings).toEqual({ sessionId: sid, think: false });
      expect(row.activeAt >= before && row.activeAt <= after).toBe(true);
    });

    it('sessionIds lists only those sessions; deleted settings leave the list', async () => {
      await seed({ a: 1, b: 2, c: 3, d: 4 });
      await sessions.delete(`${sid}-d`);
      await sessions.advanceGeneration(`${sid}-e`);

      const only = await sessions.listByActivity!({
        limit: 5,
        sessionIds: [`${sid}-a`, `${sid}-c`, `${sid}-d`, `${sid}-unknown`],
      });

      expect(ids(only)).toEqual(['c', 'a']);
      expect(ids(await sessions.listByActivity!({ limit: 5 }))).toEqual(['c', 'b', 'a']);
      expect(await sessions.listByActivity!({ limit: 5, sessionIds: [] })).toEqual([]);
    });

    it('an after place with U+0000 in it (a cursor is caller text) is compared, not refused', async () => {
      await seed({ a: 1, b: 2, c: 3 });

      const rows = await sessions.listByActivity!({
        limit: 5,
        after: { activeAt: `${at(2)}\u0000`, sessionId: '\u0000' },
      });

      expect(ids(rows)).toEqual(['b', 'a']);
    });

    it('a session active again while paging moves ahead of the pages read; no unchanged one is skipped or repeated', async () => {
      await seed({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6 });
      const first = await sessions.listByActivity!({ limit: 2 });

      // While the client reads on: one already listed and one not yet listed become active.
      await sessions.ensure(`${sid}-f`, {}, { activeAt: at(40) });
      await sessions.ensure(`${sid}-b`, {}, { activeAt: at(41) });
      const rest = await sessions.listByActivity!({ limit: 10, after: keyOf(first[1]) });

      expect(ids(first)).toEqual(['f', 'e']);
      expect(ids(rest)).toEqual(['d', 'c', 'a']);
      expect(ids(await sessions.listByActivity!({ limit: 2 }))).toEqual(['b', 'f']);
    });

    it('paging while random sessions become active lists every unchanged session exactly once, and ends', async () => {
      const names = 'abcdefgh'.split('');
      // Every touch is later than any activity before it, across the runs too.
      let second = 100;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.array(fc.array(fc.constantFrom(...names), { maxLength: 3 }), { maxLength: 8 }),
          async (limit, touchesPerPage) => {
            const run = `${sid}-${Math.random().toString(36).slice(2, 8)}`;
            for (const [i, name] of names.entries()) {
              await sessions.ensure(`${run}-${name}`, {}, { activeAt: at(i) });
            }
            const seen: string[] = [];
            const touched = new Set<string>();
            let after: SessionActivityKey | undefined;
            let ended = false;
            // Each page lists at least one session never listed before: 9 pages at most.
            for (let page = 0; page <= names.length && !ended; page++) {
              const rows = await sessions.listByActivity!({
                limit,
                ...(after ? { after } : {}),
              });
              for (const row of rows) seen.push(row.settings.sessionId);
              ended = rows.length < limit;
              if (ended) break;
              after = keyOf(rows[rows.length - 1]);
              for (const name of touchesPerPage[page] ?? []) {
                touched.add(`${run}-${name}`);
                await sessions.ensure(`${run}-${name}`, {}, { activeAt: at(second++) });
              }
            }
            const all = names.map((n) => `${run}-${n}`);
            const unchanged = all.filter((id) => !touched.has(id));
            for (const id of all) await sessions.delete(id);
            expect(ended).toBe(true);
            expect(new Set(seen).size).toBe(seen.length);
            expect(seen.filter((id) => !touched.has(id)).sort()).toEqual(unchanged.sort());
          },
        ),
        { numRuns: 15 },
      );
    });

    if (traits.durable) {
      it('the activity survives a restart', async () => {
        await seed({ a: 5, b: 7 });

        const reopened = await stores.restart!();

        expect(shape(await reopened.sessions.listByActivity!({ limit: 5 }))).toEqual([
          `${sid}-b@07`,
          `${sid}-a@05`,
        ]);
      });
    }
  });
}
