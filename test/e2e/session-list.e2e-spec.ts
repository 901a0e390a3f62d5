import { AgentService } from '../../src/agent';
import { MemorySessionStore, SessionStore } from '../../src';
import { ApiApp } from '../support/api-app';
import { Deferred } from '../support/deferred';

/** What `GET /agent/sessions` answers for one session. */
interface Listed {
  sessionId: string;
  state: string;
  runningTurnId?: string;
  waiting: number;
  lastTurn?: { turnId: string; outcome: string; endedAt?: string };
  model?: { provider?: string; model: string };
  updatedAt: string;
}

describe('GET /agent/sessions (the session list, README: REST API)', () => {
  let a: ApiApp;
  beforeEach(async () => {
    // An application (and SQLite file) of its own per test: the list holds only its sessions.
    a = await ApiApp.start();
  });
  afterEach(() => a?.close());

  const postAndWait = (body: object) => a.postAndWait(body);

  const list = async (query = ''): Promise<{ sessions: Listed[]; nextCursor?: string }> => {
    const res = await a.http().get(`/agent/sessions${query}`).set(a.auth);
    expect(res.status).toBe(200);
    return res.body;
  };

  /** Every page, `limit` at a time, following `nextCursor`; between pages `between(i)` runs. */
  const allPages = async (limit: number, between?: (page: number) => Promise<unknown>) => {
    const pages: Listed[][] = [];
    let cursor: string | undefined;
    do {
      const query = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await list(query);
      pages.push(page.sessions);
      cursor = page.nextCursor;
      if (cursor) await between?.(pages.length);
    } while (cursor);
    return pages;
  };

  const ids = (sessions: Listed[]) => sessions.map((s) => s.sessionId);

  it('answers the sessions most recent activity first, each with its state, last turn and activity time, paged by nextCursor to the end', async () => {
    const turns: Record<string, string> = {};
    for (const id of ['s1', 's2', 's3', 's4', 's5']) {
      turns[id] = (await postAndWait({ sessionId: id, content: `hi from ${id}` })).body.turnId;
    }

    const pages = await allPages(2);

    expect(pages.map(ids)).toEqual([['s5', 's4'], ['s3', 's2'], ['s1']]);
    const s4 = pages[0][1];
    expect(s4).toEqual({
      sessionId: 's4',
      state: 'idle',
      waiting: 0,
      lastTurn: { turnId: turns.s4, outcome: 'replied', endedAt: expect.any(String) },
      updatedAt: s4.lastTurn!.endedAt,
    });
    const times = pages.flat().map((s) => s.updatedAt);
    expect([...times].sort().reverse()).toEqual(times);
  });

  it('a session active again while a client pages moves ahead of the pages read; every other session is listed once', async () => {
    for (const id of ['p1', 'p2', 'p3', 'p4', 'p5', 'p6']) {
      await postAndWait({ sessionId: id, content: 'hi' });
    }

    // After the first page (p6, p5), an older session not yet read has a new turn.
    const pages = await allPages(2, async (page) => {
      if (page === 1) await postAndWait({ sessionId: 'p2', content: 'again' });
    });

    expect(pages.map(ids)).toEqual([['p6', 'p5'], ['p4', 'p3'], ['p1']]);
    expect(ids((await list('?limit=1')).sessions)).toEqual(['p2']);
  });

  it('a session that only has settings is listed as idle, with its model, from when its settings were made', async () => {
    await postAndWait({ sessionId: 'talked', content: 'hi' });
    const made = await a
      .http()
      .put('/agent/sessions/only-settings')
      .set(a.auth)
      .send({ model: { model: 'test-model' }, think: true });
    expect(made.status).toBe(200);

    const { sessions, nextCursor } = await list();

    expect(nextCursor).toBeUndefined();
    expect(ids(sessions)).toEqual(['only-settings', 'talked']);
    expect(sessions[0]).toEqual({
      sessionId: 'only-settings',
      state: 'idle',
      waiting: 0,
      model: { model: 'test-model' },
      updatedAt: expect.any(String),
    });
    expect(Date.parse(sessions[0].updatedAt)).toBeGreaterThanOrEqual(
      Date.parse(sessions[1].updatedAt),
    );
  });

  it('state filters the list: running with its turn and waiting count, idle, held, and none waiting', async () => {
    await postAndWait({ sessionId: 'calm', content: 'hi' });
    await a.http().put('/agent/sessions/quiet').set(a.auth).send({ think: false });
    a.server.enqueue({ text: 'held answer', hold: true }, { text: 'next' });
    const called = a.nextModelCall();
    const started = a.nextEvent('agent:turn:start', (e) => e.sessionId === 'busy');
    const first = postAndWait({ sessionId: 'busy', content: 'one' });
    const { turnId } = await started;
    await called;
    const queued = a.nextEvent(
      'agent:queue',
      (e) => e.sessionId === 'busy' && e.waiting.length === 1,
    );
    const second = postAndWait({ sessionId: 'busy', content: 'two' });
    await queued;

    const running = await list('?state=running');
    const idle = await list('?state=idle');
    const waiting = await list('?state=waiting');
    const all = await list();

    expect(running.sessions).toEqual([
      expect.objectContaining({ sessionId: 'busy', state: 'running', runningTurnId: turnId }),
    ]);
    expect(running.sessions[0].waiting).toBe(1);
    expect(ids(idle.sessions)).toEqual(['quiet', 'calm']);
    expect(waiting.sessions).toEqual([]);
    expect(all.sessions.map((s) => `${s.sessionId}:${s.state}`)).toEqual([
      'busy:running',
      'quiet:idle',
      'calm:idle',
    ]);

    a.server.release();
    await Promise.all([first, second]);
    // A clearing holds its sessions until its clear function has finished.
    const clearing = new Deferred<void>();
    const entered = new Deferred<void>();
    const hold = a.app.get(AgentService).clearing(['calm'], () => {
      entered.resolve();
      return clearing.promise;
    });
    await entered.promise;
    const held = await list('?state=held');
    clearing.resolve();
    await hold;

    expect(held.sessions.map((s) => `${s.sessionId}:${s.state}`)).toEqual(['calm:held']);
    expect(ids((await list('?state=idle')).sessions)).toEqual(['busy', 'quiet', 'calm']);
  });

  it('limit defaults to 50; a filtered list pages by nextCursor too', async () => {
    for (let i = 0; i < 53; i++) {
      const id = `bulk-${String(i).padStart(2, '0')}`;
      expect((await a.http().put(`/agent/sessions/${id}`).set(a.auth).send({})).status).toBe(200);
    }

    const first = await list();
    const idlePages = (await allPages(20)).map((page) => page.length);
    const rest = await list(`?state=idle&cursor=${encodeURIComponent(first.nextCursor!)}`);

    expect(first.sessions).toHaveLength(50);
    expect(first.nextCursor).toEqual(expect.any(String));
    expect(idlePages).toEqual([20, 20, 13]);
    expect(rest.nextCursor).toBeUndefined();
    expect(ids([...first.sessions, ...rest.sessions]).sort()).toEqual(
      Array.from({ length: 53 }, (_, i) => `bulk-${String(i).padStart(2, '0')}`),
    );
  });

  it.each([
    ['limit', '0', '?limit=0'],
    ['limit', 'past 200', '?limit=201'],
    ['limit', 'not a number', '?limit=ten'],
    ['limit', 'not whole', '?limit=1.5'],
    ['limit', 'given twice', '?limit=2&limit=3'],
    ['state', 'unknown', '?state=busy'],
    ['cursor', 'not base64url', '?cursor=not-a-cursor'],
    ['cursor', 'of no list', `?cursor=${Buffer.from('{"a":1}').toString('base64url')}`],
    ['cursor', 'too long', `?cursor=${'A'.repeat(3000)}`],
    ['page', 'unknown field', '?page=2'],
  ])('a bad %s (%s) answers 400 naming the field', async (field, _why, query) => {
    const res = await a.http().get(`/agent/sessions${query}`).set(a.auth);

    expect(res.status).toBe(400);
    expect(Object.keys(res.body.fields)).toEqual([field]);
  });

  it('needs the admin token', async () => {
    expect((await a.http().get('/agent/sessions')).status).toBe(401);
  });
});

describe('GET /agent/sessions with a host session store that cannot list', () => {
  let a: ApiApp;
  afterEach(() => a?.close());

  it('answers 501 naming the missing store method; the other session routes still work', async () => {
    // A host's store of the earlier port: no listByActivity.
    const store = Object.assign(new MemorySessionStore(), { listByActivity: undefined });
    a = await ApiApp.start({
      override: (builder) => builder.overrideProvider(SessionStore).useValue(store),
    });

    const res = await a.http().get('/agent/sessions').set(a.auth);
    const one = await a.http().put('/agent/sessions/s').set(a.auth).send({ think: true });

    expect(res.status).toBe(501);
    expect(res.body.message).toContain('listByActivity');
    expect(one.status).toBe(200);
    await expect(a.app.get(AgentService).listSessions()).rejects.toThrow(
      'The sessions store does not implement listByActivity()',
    );
  });
});
