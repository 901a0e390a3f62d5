import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CompiledQuery, Migrator, sql, type Kysely } from 'kysely';
import { createSqlStores, SqlMessageLog, type NewMessage, type SqlStores } from '../../src';
import {
  InCodeMigrationProvider,
  migrateToLatest,
  openDatabase,
  type Database,
  type SqlDialect,
} from '../../src/session-bridge';
import {
  closeAll,
  describePg,
  expectOpenError,
  migratorOf,
  tempPgSchema,
  tempSqlite,
  type TempDb,
} from './sql-test-db';

/** Every migration, in run order. */
const MIGRATIONS = [
  '0001_initial',
  '0002_inbox',
  '0003_session_activity',
  '0004_session_fences',
  '0005_message_counts',
];

const msg = (sessionId: string, content: string, extra: Partial<NewMessage> = {}): NewMessage => ({
  sessionId,
  role: 'user',
  content,
  metadata: {},
  ...extra,
});

/**
 * A database of the second schema version (no session activity) with three sessions written by
 * it, migrated to the latest: the migration's names, then the stores' listing of them.
 */
async function migratedFromInbox(url: string, open: SqlStores[]) {
  const opened = await openDatabase(url);
  let ran: string[];
  try {
    const migrator = await migratorOf(opened);
    expect((await migrator.migrateTo('0002_inbox')).error).toBeUndefined();
    for (const [id, updated] of [
      ['old-a', '2020-01-01T00:00:03.000Z'],
      ['old-b', '2020-01-01T00:00:01.000Z'],
      ['old-c', '2020-01-01T00:00:02.000Z'],
    ]) {
      await sql`insert into sessions (session_id, kind, settings, created_at, updated_at)
        values (${id}, null, ${'{"think":true}'}, ${'2020-01-01T00:00:00.000Z'}, ${updated})`.execute(
        opened.db,
      );
    }
    ran = await migrateToLatest(opened.db, opened.dialect);
  } finally {
    await opened.close();
  }
  const upgraded = await createSqlStores(url);
  open.push(upgraded);
  return { ran, upgraded };
}

/** The plan of the store's list query (the page after a place), with sequential scans off. */
async function listingPlan(db: Kysely<Database>, dialect: SqlDialect): Promise<string> {
  const query = db
    .selectFrom('sessions')
    .select(['session_id', 'settings', 'active_at'])
    .where((eb) =>
      eb(eb.refTuple('active_at', 'session_id'), '<', eb.tuple('2999-01-01T00:00:00.000Z', 'x')),
    )
    .orderBy('active_at', 'desc')
    .orderBy('session_id', 'desc')
    .limit(50)
    .compile();
  return db.connection().execute(async (conn) => {
    if (dialect === 'postgres') await sql`set enable_seqscan = off`.execute(conn);
    const prefix = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
    const { rows } = await conn.executeQuery(
      CompiledQuery.raw(prefix + query.sql, [...query.parameters]),
    );
    return rows.map((r) => Object.values(r as object).join(' ')).join('\n');
  });
}

describe('SQL stores: SQLite specifics', () => {
  let file: TempDb;
  const open: SqlStores[] = [];
  const stores = async (url = file.url) => {
    const created = await createSqlStores(url);
    open.push(created);
    return created;
  };

  beforeEach(() => {
    file = tempSqlite();
  });

  afterEach(async () => {
    await closeAll(open).finally(() => file.drop());
  });

  it('two stores on one file: 200 interleaved appends never hit "database is locked", none lost', async () => {
    const [a, b] = await Promise.all([stores(), stores()]);
    const sid = `s-${randomUUID()}`;

    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        (i % 2 ? a : b).log.append(
          i % 10 === 0
            ? [msg(sid, `${i}`), msg(sid, `${i}.tool`, { role: 'tool', toolCallId: `c${i}` })]
            : [msg(sid, `${i}`)],
        ),
      ),
    );

    const seenByA = await a.log.history(sid);
    const seenByB = await b.log.history(sid);
    expect(seenByA).toHaveLength(220);
    expect(seenByB).toEqual(seenByA);
    expect(new Set(seenByA.map((m) => m.content)).size).toBe(220);
    // A group stays together: each tool result right after its input.
    for (const [i, m] of seenByA.entries()) {
      if (m.role === 'tool') expect(`${seenByA[i - 1].content}.tool`).toBe(m.content);
    }
  });

  it('two stores on one file: the same key appended by both is stored once', async () => {
    const [a, b] = await Promise.all([stores(), stores()]);
    const sid = `s-${randomUUID()}`;
    const key = `k-${randomUUID()}`;

    const [[fromA], [fromB]] = await Promise.all([
      a.log.append([msg(sid, 'from a', { key })]),
      b.log.append([msg(sid, 'from b', { key })]),
    ]);

    expect(fromA.id).toBe(fromB.id);
    expect(await a.log.count(sid)).toBe(1);
  });

  it('two stores on one file: the same inbox id accepted by both is recorded once', async () => {
    const [a, b] = await Promise.all([stores(), stores()]);
    const input = { id: `in-${randomUUID()}`, sessionId: `s-${randomUUID()}`, content: 'x' };

    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).inbox.accept(input)),
    );

    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(new Set(results.map((r) => r.entry.seq)).size).toBe(1);
    expect(await b.inbox.unsettled(input.sessionId)).toHaveLength(1);
  });

  it('a database of the first schema version is migrated to the inbox, its history kept', async () => {
    const opened = await openDatabase(file.url);
    try {
      const provider = new InCodeMigrationProvider('sqlite');
      const migrator = new Migrator({ db: opened.db, provider });
      expect((await migrator.migrateTo('0001_initial')).error).toBeUndefined();
      // Written by the first version, which had no inbox.
      await new SqlMessageLog(opened.db).append([msg('s', 'old')]);
      // The inbox, then every later migration.
      expect(await migrateToLatest(opened.db, opened.dialect)).toEqual(MIGRATIONS.slice(1));
    } finally {
      await opened.close();
    }

    const upgraded = await stores();
    expect((await upgraded.log.history('s')).map((m) => m.content)).toEqual(['old']);
    await upgraded.inbox.accept({ id: 'in-1', sessionId: 's', content: 'new' });
    expect(await upgraded.inbox.unsettled('s')).toHaveLength(1);
  });

  it('a database without session activity is migrated: its sessions listed by their last change, then by new activity', async () => {
    const { ran, upgraded } = await migratedFromInbox(file.url, open);

    expect(ran).toEqual(MIGRATIONS.slice(2));
    const listed = await upgraded.sessions.listByActivity({ limit: 10 });
    expect(listed.map((r) => [r.settings.sessionId, r.activeAt])).toEqual([
      ['old-a', '2020-01-01T00:00:03.000Z'],
      ['old-c', '2020-01-01T00:00:02.000Z'],
      ['old-b', '2020-01-01T00:00:01.000Z'],
    ]);
    expect(listed[0].settings).toEqual({ sessionId: 'old-a', think: true });
    await upgraded.sessions.ensure('old-b', {}, { activeAt: '2021-01-01T00:00:00.000Z' });
    const [first] = await upgraded.sessions.listByActivity({ limit: 1 });
    expect(first.settings.sessionId).toBe('old-b');
  });

  it('the session list is one range scan of the sessions_activity index', async () => {
    const opened = await openDatabase(file.url);
    try {
      await migrateToLatest(opened.db, opened.dialect);
      const plan = await listingPlan(opened.db, opened.dialect);
      expect(plan).toMatch(/USING (COVERING )?INDEX sessions_activity/);
      expect(plan).not.toMatch(/TEMP B-TREE/);
    } finally {
      await opened.close();
    }
  });

  it('another process writing the same file at the same time waits instead of failing', async () => {
    const mine = await stores();
    // The child opens the file, says "ready" and then writes while this process writes too.
    const script = `
      const { createSqlStores } = require(${JSON.stringify(resolve(__dirname, '../../src/session-bridge'))});
      (async () => {
        const s = await createSqlStores(process.argv[1]);
        process.stdout.write('ready\\n');
        for (let i = 0; i < 300; i++) {
          await s.log.append([{ sessionId: process.argv[2], role: 'assistant', content: 'child ' + i, metadata: {} }]);
        }
        await s.close();
      })().catch((e) => { console.error(e.message); process.exit(1); });`;
    /** One round: both write 300 messages to a new session; its history after. */
    const round = async () => {
      const sid = `s-${randomUUID()}`;
      const child = spawn(
        process.execPath,
        ['-r', require.resolve('@swc-node/register'), '-e', script, file.url, sid],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((done) => child.on('exit', done));
      await new Promise<void>((ready) => child.stdout.once('data', () => ready()));

      for (let i = 0; i < 300; i++) await mine.log.append([msg(sid, `parent ${i}`)]);
      const code = await exited;

      expect(stderr).toBe('');
      expect(code).toBe(0);
      const all = await mine.log.history(sid);
      expect(all).toHaveLength(600);
      return all;
    };
    const switchesOf = (all: { role: string }[]) =>
      all.filter((m, i) => i > 0 && m.role !== all[i - 1].role).length;

    // Writers alternated: the two processes really wrote at the same time. A loaded machine may
    // run one writer's 300 messages while the other is not scheduled; then another round.
    let switches = switchesOf(await round());
    for (let rounds = 1; switches <= 1 && rounds < 5; rounds++)
      switches = switchesOf(await round());
    expect(switches).toBeGreaterThan(1);
  }, 60_000);

  it('a corrupted file rejects with one StoreOpenError line naming AGENT_DB and the path', async () => {
    writeFileSync(file.url, randomBytes(8192));

    await expectOpenError(createSqlStores(file.url), file.url, /file is not a database/);
  });

  it('an unwritable path (under a file) rejects with one StoreOpenError line', async () => {
    writeFileSync(file.url, 'a file, not a directory');
    const path = join(file.url, 'sub', 'db.sqlite');

    await expectOpenError(createSqlStores(path), path, /cannot be opened/);
  });

  it('a URL of another database rejects with one StoreOpenError line', async () => {
    await expectOpenError(openDatabase('mysql://u:pw@h/db'), 'mysql://', /neither/);
  });

  it('migrations run twice are a no-op, recorded once in the migration table', async () => {
    const opened = await openDatabase(file.url);
    try {
      expect(await migrateToLatest(opened.db, opened.dialect)).toEqual(MIGRATIONS);
      expect(await migrateToLatest(opened.db, opened.dialect)).toEqual([]);
      const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(
        opened.db,
      );
      expect(rows.map((r) => r.name)).toEqual(MIGRATIONS);
    } finally {
      await opened.close();
    }
    // A store opened later on the migrated file works on it.
    const later = await stores();
    await later.log.append([msg('s', 'after')]);
    expect(await later.log.count('s')).toBe(1);
  });

  it('a missing optional driver fails with one line that says what to install', async () => {
    await jest
      .isolateModulesAsync(async () => {
        jest.doMock('better-sqlite3', () => {
          throw Object.assign(new Error("Cannot find module 'better-sqlite3'"), {
            code: 'MODULE_NOT_FOUND',
          });
        });
        jest.doMock('pg', () => {
          throw Object.assign(new Error("Cannot find module 'pg'"), { code: 'MODULE_NOT_FOUND' });
        });
        const isolated = await import('../../src/session-bridge/sql/open-database');

        await expect(isolated.openDatabase(file.url)).rejects.toThrow(
          'AGENT_DB is a SQLite file path but the optional package "better-sqlite3" is not installed: npm install better-sqlite3',
        );
        await expect(isolated.openDatabase('postgres://u@h/db')).rejects.toThrow(
          'AGENT_DB is a PostgreSQL URL but the optional package "pg" is not installed: npm install pg',
        );
      })
      .finally(() => {
        // doMock outlives the isolated registry: give later tests the real drivers back.
        jest.dontMock('better-sqlite3');
        jest.dontMock('pg');
      });
  });

  it("a directory that cannot be made rejects with one StoreOpenError line instead of hanging (Node's recursive mkdir loops on /proc)", async () => {
    const path = '/proc/no-such-dir/db.sqlite';

    await expectOpenError(createSqlStores(path), path, /cannot be opened: .*ENOENT/);
  });

  it('an unreachable PostgreSQL server rejects with one line, the password masked', async () => {
    const message = await expectOpenError(
      openDatabase('postgres://u:secret@127.0.0.1:1/db'),
      '127.0.0.1:1',
      /cannot be opened/,
    );
    expect(message).not.toContain('secret');
  });
});

describePg('SQL stores: PostgreSQL specifics', () => {
  let schema: TempDb;
  const open: SqlStores[] = [];

  beforeEach(async () => {
    schema = await tempPgSchema();
  });

  afterEach(async () => {
    await closeAll(open).finally(() => schema.drop());
  });

  it('two store instances on one schema (migrated at once) see each other', async () => {
    const [a, b] = await Promise.all([createSqlStores(schema.url), createSqlStores(schema.url)]);
    open.push(a, b);
    const sid = `s-${randomUUID()}`;

    await a.log.append([msg(sid, 'written by a')]);
    await b.sessions.ensure(sid, { historyLimit: 3 });
    await a.sessions.update(sid, { think: true });

    expect((await b.log.history(sid)).map((m) => m.content)).toEqual(['written by a']);
    expect(await b.sessions.get(sid)).toEqual({ sessionId: sid, historyLimit: 3, think: true });
    // Concurrent updates of different fields from both instances: none is lost.
    await Promise.all([
      a.sessions.update(sid, { maxToolIterations: 4 }),
      b.sessions.update(sid, { kind: 'room' }),
      a.sessions.update(sid, { model: { model: 'm' } }),
      b.sessions.update(sid, { historyLimit: 9 }),
    ]);
    expect(await a.sessions.get(sid)).toEqual({
      sessionId: sid,
      think: true,
      maxToolIterations: 4,
      kind: 'room',
      model: { model: 'm' },
      historyLimit: 9,
    });
    const generations = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).sessions.advanceGeneration(sid)),
    );
    expect([...generations].sort((x, y) => x - y)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    const key = `k-${randomUUID()}`;
    const [[fromA], [fromB]] = await Promise.all([
      a.log.append([msg(sid, 'a', { key })]),
      b.log.append([msg(sid, 'b', { key })]),
    ]);
    expect(fromA.id).toBe(fromB.id);
    const input = { id: `in-${randomUUID()}`, sessionId: sid, content: 'x' };
    const accepted = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).inbox.accept(input)),
    );
    expect(accepted.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(await b.inbox.unsettled(sid)).toEqual([accepted[0].entry]);
  });

  it('a schema without session activity is migrated: its sessions listed by their last change, in binary order', async () => {
    const { ran, upgraded } = await migratedFromInbox(schema.url, open);

    expect(ran).toEqual(MIGRATIONS.slice(2));
    expect(
      (await upgraded.sessions.listByActivity({ limit: 10 })).map((r) => r.settings.sessionId),
    ).toEqual(['old-a', 'old-c', 'old-b']);
    // Ids that a linguistic collation would order otherwise: binary order, as the other stores.
    for (const id of ['a-b', 'aB', 'ab', 'a_c']) {
      await upgraded.sessions.ensure(id, {}, { activeAt: '2021-01-01T00:00:00.000Z' });
    }
    const tied = await upgraded.sessions.listByActivity({ limit: 4 });
    expect(tied.map((r) => r.settings.sessionId)).toEqual(['ab', 'a_c', 'aB', 'a-b']);
    const next = await upgraded.sessions.listByActivity({
      limit: 4,
      after: { activeAt: tied[1].activeAt, sessionId: 'a_c' },
    });
    expect(next.map((r) => r.settings.sessionId)).toEqual(['aB', 'a-b', 'old-a', 'old-c']);
  });

  it('the session list is a scan of the sessions_activity index', async () => {
    const opened = await openDatabase(schema.url);
    try {
      await migrateToLatest(opened.db, opened.dialect);
      const plan = await listingPlan(opened.db, opened.dialect);
      expect(plan).toMatch(/Index Scan Backward using sessions_activity/);
      expect(plan).not.toMatch(/Sort|Seq Scan/);
    } finally {
      await opened.close();
    }
  });

  it('migrations run twice are a no-op', async () => {
    const opened = await openDatabase(schema.url);
    try {
      expect(await migrateToLatest(opened.db, opened.dialect)).toEqual(MIGRATIONS);
      expect(await migrateToLatest(opened.db, opened.dialect)).toEqual([]);
    } finally {
      await opened.close();
    }
  });
});

/** JSON round trips on the database `makeDb` gives. */
const roundTrip = (makeDb: () => Promise<TempDb>) => () => {
  let db: TempDb;
  let stores: SqlStores[] = [];

  beforeEach(async () => {
    db = await makeDb();
    stores = [await createSqlStores(db.url)];
  });

  afterEach(async () => {
    await closeAll(stores).finally(() => db.drop());
  });

  it('toolCalls and nested metadata come back equal, also through another connection', async () => {
    const sid = `s-${randomUUID()}`;
    const input: NewMessage = msg(sid, 'naïve café 数据 \u{1F600} "quoted" \\ back', {
      role: 'assistant',
      toolCalls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'search', arguments: '{"q":"a\\"b"}' },
        },
        { id: 'call_2', type: 'function', function: { name: 'noop', arguments: '{}' } },
      ],
      reasoningContent: 'because',
      key: `k-${randomUUID()}`,
      metadata: {
        turnId: 't1',
        tokens: { prompt: 12, completion: 3 },
        turnRecord: { outcome: 'ok', error: null },
        deep: { list: [1, 'two', { three: [true, false, null] }], empty: {}, none: [] },
        sent: false,
      },
    });

    const [stored] = await stores[0].log.append([input]);
    stores.push(await createSqlStores(db.url));
    const [reread] = await stores[1].log.history(sid);

    const { createdAt: _createdAt, ...expected } = input;
    expect(stored).toMatchObject(expected);
    expect(reread).toEqual(stored);
  });

  it('a non-string metadata.turnId is kept but is no rollback target', async () => {
    const sid = `s-${randomUUID()}`;
    await stores[0].log.append([msg(sid, 'odd', { metadata: { turnId: 42 } })]);

    expect(await stores[0].log.rollbackTurn(sid, '42')).toBe(0);
    expect((await stores[0].log.history(sid))[0].metadata).toEqual({ turnId: 42 });
  });
};

describe(
  'SQL stores: JSON round trip on sqlite',
  roundTrip(async () => tempSqlite()),
);
describePg('SQL stores: JSON round trip on postgres', roundTrip(tempPgSchema));
