import { FakeOpenAiServer } from '../../src/testing';
import { ApiApp, TEST_TOKEN } from '../support/api-app';

/** Every admin route of the README's REST reference, with a valid body. */
const ADMIN_ROUTES: { method: 'get' | 'post' | 'put' | 'delete'; path: string; body?: object }[] = [
  { method: 'post', path: '/agent/messages', body: { sessionId: 'auth', content: 'hi' } },
  { method: 'post', path: '/agent/sessions/auth/abort', body: {} },
  { method: 'post', path: '/agent/sessions/abort', body: {} },
  { method: 'get', path: '/agent/sessions' },
  { method: 'get', path: '/agent/sessions/auth' },
  { method: 'put', path: '/agent/sessions/auth', body: { think: true } },
  { method: 'put', path: '/agent/sessions/auth/model', body: { model: 'm' } },
  { method: 'post', path: '/agent/sessions/clear', body: { sessionIds: ['auth'] } },
  { method: 'delete', path: '/agent/sessions/auth' },
  { method: 'get', path: '/agent/sessions/auth/queue' },
  { method: 'get', path: '/agent/sessions/auth/usage' },
  { method: 'get', path: '/agent/sessions/auth/history' },
];

/** The error shape: exactly these keys (fields only on validation failures). */
function expectErrorShape(body: any, statusCode: number): void {
  expect(body).toEqual(
    expect.objectContaining({ statusCode, error: expect.any(String), message: expect.any(String) }),
  );
  expect(Object.keys(body).sort()).toEqual(
    body.fields ? ['error', 'fields', 'message', 'statusCode'] : ['error', 'message', 'statusCode'],
  );
}

describe('REST API (README: REST API)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  const postAndWait = (body: object) => a.postAndWait(body);

  describe('POST /agent/messages', () => {
    it('answers 202 { accepted: true } at once and the turn runs on', async () => {
      const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === 'post-202');
      a.server.enqueue({ text: 'Hello there', chunks: 2 });

      const res = await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .send({ sessionId: 'post-202', content: 'hi', userId: 'u1', platform: 'web' });

      expect(res.status).toBe(202);
      expect(res.body).toEqual({ accepted: true });
      expect(await ended).toMatchObject({ outcome: 'replied', reply: 'Hello there' });
    });

    it('?wait=true answers 200 with the settled form once the turn has ended', async () => {
      a.server.enqueue({ text: 'Settled reply' });

      const res = await postAndWait({
        sessionId: 'post-wait',
        content: 'hi',
        userId: 'u1',
        platform: 'web',
        source: 'webhook',
        actor: { platform: 'web', userId: 'owner' },
        attachments: [{ kind: 'image', data: 'https://example.com/a.png', mimeType: 'image/png' }],
        sessionKind: 'web',
      });

      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        settled: 'turn',
        turnId: expect.any(String),
        outcome: 'replied',
        reply: 'Settled reply',
      });
    });

    it('?wait=true answers { settled: "dropped", reason } for an input dropped by abort { queued: true }', async () => {
      a.server.enqueue({ text: 'first part and more', chunks: 2, hold: true });
      const called = a.nextModelCall();
      const first = postAndWait({ sessionId: 'post-drop', content: 'one' });
      await called;
      const queued = a.nextEvent(
        'agent:queue',
        (e) => e.sessionId === 'post-drop' && e.waiting.length === 1,
      );
      const second = postAndWait({ sessionId: 'post-drop', content: 'two' });
      await queued;

      const queue = await a.http().get('/agent/sessions/post-drop/queue').set(a.auth);
      expect(queue.body).toEqual({
        sessionId: 'post-drop',
        waiting: [expect.objectContaining({ sessionId: 'post-drop', content: 'two' })],
      });
      const abort = await a
        .http()
        .post('/agent/sessions/post-drop/abort')
        .set(a.auth)
        .send({ queued: true, reason: 'test' });

      expect(abort.body).toEqual({ stopped: true });
      expect((await second).body).toEqual({ settled: 'dropped', reason: 'aborted' });
      expect((await first).body).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    });
  });

  describe('POST /agent/sessions/:sessionId/abort', () => {
    it('S3: stops the running turn; by is the authenticated caller (admin)', async () => {
      a.server.enqueue({ text: 'a long answer', chunks: 2, hold: true });
      const started = a.nextEvent('agent:turn:start', (e) => e.sessionId === 'abort-1');
      const called = a.nextModelCall();
      const waiting = postAndWait({ sessionId: 'abort-1', content: 'go' });
      const { turnId } = await started;
      await called;

      const res = await a
        .http()
        .post('/agent/sessions/abort-1/abort')
        .set(a.auth)
        .send({ turnId, reason: 'operator stop' });

      expect(res.status).toBe(200);
      expect(res.body).toEqual({ stopped: true });
      expect((await waiting).body).toEqual({ settled: 'turn', turnId, outcome: 'aborted' });
      const history = await a.http().get('/agent/sessions/abort-1/history').set(a.auth);
      const record = history.body.messages.at(-1).metadata.turnRecord;
      expect(record).toMatchObject({
        outcome: 'aborted',
        by: { platform: 'admin', userId: 'admin' },
      });
    });

    it('answers { stopped: false } when nothing runs, with or without a body', async () => {
      const empty = await a.http().post('/agent/sessions/abort-idle/abort').set(a.auth);
      const mismatch = await a
        .http()
        .post('/agent/sessions/abort-idle/abort')
        .set(a.auth)
        .send({ turnId: 'not-running', queued: true });

      expect([empty.status, empty.body]).toEqual([200, { stopped: false }]);
      expect([mismatch.status, mismatch.body]).toEqual([200, { stopped: false }]);
    });
  });

  describe('POST /agent/sessions/abort (stop all)', () => {
    it('S3: stops every running turn and answers their sessions; by is the caller; queued drops the waiting inputs', async () => {
      a.server.enqueue({ text: 'first', chunks: 2, hold: true }, { text: 'second', hold: true });
      const calledFirst = a.nextModelCall();
      const first = postAndWait({ sessionId: 'all-1', content: 'go' });
      await calledFirst;
      const calledSecond = a.nextModelCall();
      const second = postAndWait({ sessionId: 'all-2', content: 'go too' });
      await calledSecond;
      const queued = a.nextEvent(
        'agent:queue',
        (e) => e.sessionId === 'all-1' && e.waiting.length === 1,
      );
      const behind = postAndWait({ sessionId: 'all-1', content: 'behind' });
      await queued;

      const res = await a
        .http()
        .post('/agent/sessions/abort')
        .set(a.auth)
        .send({ queued: true, reason: 'maintenance' });

      expect(res.status).toBe(200);
      expect([...res.body.stopped].sort()).toEqual(['all-1', 'all-2']);
      expect(Object.keys(res.body)).toEqual(['stopped']);
      expect((await first).body).toMatchObject({ settled: 'turn', outcome: 'aborted' });
      expect((await second).body).toMatchObject({ settled: 'turn', outcome: 'aborted' });
      expect((await behind).body).toEqual({ settled: 'dropped', reason: 'aborted' });
      for (const id of ['all-1', 'all-2']) {
        const history = await a.http().get(`/agent/sessions/${id}/history`).set(a.auth);
        const record = history.body.messages.find(
          (m: { metadata: { turnRecord?: unknown } }) => m.metadata.turnRecord,
        ).metadata.turnRecord;
        expect(record).toMatchObject({
          outcome: 'aborted',
          by: { platform: 'admin', userId: 'admin' },
        });
      }
    });

    it('answers { stopped: [] } when nothing runs, with or without a body', async () => {
      const empty = await a.http().post('/agent/sessions/abort').set(a.auth);
      const queued = await a
        .http()
        .post('/agent/sessions/abort')
        .set(a.auth)
        .send({ queued: true });

      expect([empty.status, empty.body]).toEqual([200, { stopped: [] }]);
      expect([queued.status, queued.body]).toEqual([200, { stopped: [] }]);
    });
  });

  describe('PUT /agent/sessions/:sessionId/model', () => {
    it('S6: 204, and the next turn of the session uses that model', async () => {
      await postAndWait({ sessionId: 'model-1', content: 'hi' });

      const res = await a
        .http()
        .put('/agent/sessions/model-1/model')
        .set(a.auth)
        .send({ model: 'assigned-model' });
      await postAndWait({ sessionId: 'model-1', content: 'again' });

      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect(a.server.requests.at(-1).model).toBe('assigned-model');
    });

    it('404 when the session has no settings', async () => {
      const res = await a
        .http()
        .put('/agent/sessions/model-none/model')
        .set(a.auth)
        .send({ model: 'x' });

      expect(res.status).toBe(404);
      expectErrorShape(res.body, 404);
    });

    it('422 when no provider serves the model (refused)', async () => {
      await postAndWait({ sessionId: 'model-2', content: 'hi' });

      const res = await a
        .http()
        .put('/agent/sessions/model-2/model')
        .set(a.auth)
        .send({ provider: 'nope', model: 'x' });

      expect(res.status).toBe(422);
      expectErrorShape(res.body, 422);
      expect(res.body.message).toMatch(/nope\/x/);
    });
  });

  describe('GET and PUT /agent/sessions/:sessionId', () => {
    it('S6: PUT creates the settings of a new session, so its model is set before the first message; the first turn uses it', async () => {
      const before = await a.http().get('/agent/sessions/pre-1').set(a.auth);
      expect(before.status).toBe(404);
      expectErrorShape(before.body, 404);

      const put = await a
        .http()
        .put('/agent/sessions/pre-1')
        .set(a.auth)
        .send({
          model: { model: 'preset-model' },
          think: true,
          maxToolIterations: 3,
          historyLimit: 20,
        });

      expect(put.status).toBe(200);
      expect(put.body).toEqual({
        sessionId: 'pre-1',
        state: 'idle',
        waiting: 0,
        settings: {
          model: { model: 'preset-model' },
          think: true,
          maxToolIterations: 3,
          historyLimit: 20,
        },
      });
      const settled = await postAndWait({ sessionId: 'pre-1', content: 'first words' });
      expect(settled.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
      expect(a.server.requests.at(-1).model).toBe('preset-model');

      // A second PUT changes only what it names.
      const again = await a.http().put('/agent/sessions/pre-1').set(a.auth).send({ think: false });
      expect(again.body.settings).toEqual({
        model: { model: 'preset-model' },
        think: false,
        maxToolIterations: 3,
        historyLimit: 20,
      });
      expect(again.body.lastTurn).toEqual({
        turnId: settled.body.turnId,
        outcome: 'replied',
        endedAt: expect.any(String),
      });
    });

    it('GET answers the state: running with its turn id and the waiting count, then idle with the last turn', async () => {
      a.server.enqueue({ text: 'held answer', hold: true }, { text: 'next' });
      const called = a.nextModelCall();
      const started = a.nextEvent('agent:turn:start', (e) => e.sessionId === 'state-1');
      const first = postAndWait({ sessionId: 'state-1', content: 'one' });
      const { turnId } = await started;
      await called;
      const queued = a.nextEvent(
        'agent:queue',
        (e) => e.sessionId === 'state-1' && e.waiting.length === 1,
      );
      const second = postAndWait({ sessionId: 'state-1', content: 'two' });
      await queued;

      const running = await a.http().get('/agent/sessions/state-1').set(a.auth);

      expect(running.status).toBe(200);
      expect(running.body).toEqual({
        sessionId: 'state-1',
        state: 'running',
        runningTurnId: turnId,
        waiting: 1,
        settings: {},
      });
      a.server.release();
      await first;
      const last = (await second).body.turnId;
      const idle = await a.http().get('/agent/sessions/state-1').set(a.auth);
      expect(idle.body).toEqual({
        sessionId: 'state-1',
        state: 'idle',
        waiting: 0,
        settings: {},
        lastTurn: { turnId: last, outcome: 'replied', endedAt: expect.any(String) },
      });
      expect(Date.parse(idle.body.lastTurn.endedAt)).toBeGreaterThan(Date.now() - 60_000);
    });

    it('PUT refuses a model no provider serves (422) and keeps the settings as they were', async () => {
      await a.http().put('/agent/sessions/pre-2').set(a.auth).send({ historyLimit: 5 }).expect(200);

      const res = await a
        .http()
        .put('/agent/sessions/pre-2')
        .set(a.auth)
        .send({ model: { provider: 'nope', model: 'x' }, historyLimit: 9 });

      expect(res.status).toBe(422);
      expectErrorShape(res.body, 422);
      const now = await a.http().get('/agent/sessions/pre-2').set(a.auth);
      expect(now.body.settings).toEqual({ historyLimit: 5 });
    });
  });

  describe('GET /agent/sessions/:sessionId/history (paged)', () => {
    it('pages back by before: the newest page first, in order within each page, until no nextBefore', async () => {
      for (let i = 1; i <= 5; i++) {
        a.server.enqueue({ text: `answer ${i}` });
        await postAndWait({ sessionId: 'paged', content: `question ${i}` });
      }
      const all = (await a.http().get('/agent/sessions/paged/history').set(a.auth)).body;
      expect(all.messages).toHaveLength(10);
      expect(all).not.toHaveProperty('nextBefore');

      const pages: { messages: { id: string; content: string }[]; nextBefore?: string }[] = [];
      let before: string | undefined;
      do {
        const res = await a
          .http()
          .get('/agent/sessions/paged/history')
          .query({ limit: 4, ...(before ? { before } : {}) })
          .set(a.auth);
        expect(res.status).toBe(200);
        pages.push(res.body);
        before = res.body.nextBefore;
      } while (before && pages.length < 10);

      expect(pages.map((p) => p.messages.map((m) => m.content))).toEqual([
        ['question 4', 'answer 4', 'question 5', 'answer 5'],
        ['question 2', 'answer 2', 'question 3', 'answer 3'],
        ['question 1', 'answer 1'],
      ]);
      expect(pages.map((p) => p.nextBefore)).toEqual([
        pages[0].messages[0].id,
        pages[1].messages[0].id,
        undefined,
      ]);
      expect(pages.reverse().flatMap((p) => p.messages)).toEqual(all.messages);
    });

    it('a before the session does not have gives an empty page', async () => {
      const res = await a
        .http()
        .get('/agent/sessions/paged/history')
        .query({ before: 'no-such-message' })
        .set(a.auth);

      expect([res.status, res.body]).toEqual([200, { messages: [] }]);
    });
  });

  describe('POST /agent/sessions/clear', () => {
    it('S4: clears the named sessions once clear has finished: { cleared: [ids] }', async () => {
      await postAndWait({ sessionId: 'clear-1', content: 'hi' });
      await postAndWait({ sessionId: 'clear-2', content: 'hi' });

      const res = await a
        .http()
        .post('/agent/sessions/clear')
        .set(a.auth)
        .send({ sessionIds: ['clear-1'], reason: 'test' });
      const one = await a.http().get('/agent/sessions/clear-1/history').set(a.auth);
      const two = await a.http().get('/agent/sessions/clear-2/history').set(a.auth);

      expect([res.status, res.body]).toEqual([200, { cleared: ['clear-1'] }]);
      expect(one.body.messages).toEqual([]);
      expect(two.body.messages.length).toBeGreaterThan(0);
    });

    it('without sessionIds clears every session: { cleared: "all" }', async () => {
      await postAndWait({ sessionId: 'clear-3', content: 'hi' });

      const res = await a.http().post('/agent/sessions/clear').set(a.auth).send({});
      const three = await a.http().get('/agent/sessions/clear-3/history').set(a.auth);

      expect([res.status, res.body]).toEqual([200, { cleared: 'all' }]);
      expect(three.body.messages).toEqual([]);
    });
  });

  describe('DELETE /agent/sessions/:sessionId', () => {
    it('S7: 204 once deleted: session:deleted emitted, history and settings gone', async () => {
      await postAndWait({ sessionId: 'del-1', content: 'hi' });
      const deleted = a.nextEvent('session:deleted', (e) => e.sessionId === 'del-1');

      const res = await a.http().delete('/agent/sessions/del-1').set(a.auth);
      const history = await a.http().get('/agent/sessions/del-1/history').set(a.auth);
      const model = await a
        .http()
        .put('/agent/sessions/del-1/model')
        .set(a.auth)
        .send({ model: 'x' });

      expect(res.status).toBe(204);
      await deleted;
      expect(history.body.messages).toEqual([]);
      expect(model.status).toBe(404);
    });

    it('S7: stops the running turn first; its ?wait=true answer is aborted', async () => {
      a.server.enqueue({ text: 'never finished', chunks: 2, hold: true });
      const called = a.nextModelCall();
      const waiting = postAndWait({ sessionId: 'del-2', content: 'go' });
      await called;

      const res = await a.http().delete('/agent/sessions/del-2').set(a.auth);

      expect(res.status).toBe(204);
      expect((await waiting).body).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    });
  });

  describe('GET /agent/sessions/:sessionId/queue, usage, history', () => {
    it('queue: { sessionId, waiting: [] } when nothing waits', async () => {
      const res = await a.http().get('/agent/sessions/idle/queue').set(a.auth);

      expect([res.status, res.body]).toEqual([200, { sessionId: 'idle', waiting: [] }]);
    });

    it('usage: a token:request snapshot without turnId', async () => {
      await postAndWait({ sessionId: 'usage-1', content: 'hi' });

      const res = await a.http().get('/agent/sessions/usage-1/usage').set(a.auth);

      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        sessionId: 'usage-1',
        used: expect.any(Number),
        contextWindow: expect.any(Number),
        historyMessages: 2,
        breakdown: expect.any(Object),
        parts: expect.any(Array),
      });
      expect(res.body).not.toHaveProperty('turnId');
    });

    it('history: { messages } as persisted, with their metadata', async () => {
      const { body } = await postAndWait({ sessionId: 'hist-1', content: 'question' });

      const res = await a.http().get('/agent/sessions/hist-1/history').set(a.auth);

      expect(res.status).toBe(200);
      expect(res.body.messages).toEqual([
        expect.objectContaining({
          role: 'user',
          content: 'question',
          metadata: expect.objectContaining({ turnId: body.turnId, turnEntry: 'opened' }),
        }),
        expect.objectContaining({
          role: 'assistant',
          content: 'ok',
          metadata: expect.objectContaining({
            turnId: body.turnId,
            turnRecord: expect.objectContaining({ outcome: 'replied' }),
          }),
        }),
      ]);
    });
  });

  describe('GET /health, GET /metrics, OpenAPI', () => {
    it('/health: 200, store, queue and model provider up (public)', async () => {
      const res = await a.http().get('/health');

      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        status: 'ok',
        info: {
          store: { status: 'up' },
          queue: { status: 'up', mode: 'in-process' },
          model: { status: 'up' },
        },
      });
    });

    it('/metrics: Prometheus text with every metric name after a turn (public)', async () => {
      await postAndWait({ sessionId: 'metrics-1', content: 'hi' });

      const res = await a.http().get('/metrics');

      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
      for (const name of [
        'agent_turns_total{outcome="replied"}',
        'agent_turn_duration_seconds_bucket',
        'agent_model_call_duration_seconds_count{provider="openai",status="ok"}',
        'agent_tokens_total{kind="prompt"}',
        'agent_tokens_total{kind="completion"}',
        'agent_waiting_inputs',
        'agent_running_turns',
        'agent_active_sessions',
      ]) {
        expect(res.text).toContain(name);
      }
      expect(res.text).toMatch(/agent_tokens_total\{kind="completion"\} [1-9]/);
    });

    it('OpenAPI: /docs-json lists every route, /docs serves the UI (public)', async () => {
      const json = await a.http().get('/docs-json');
      const ui = await a.http().get('/docs');

      expect(json.status).toBe(200);
      // The admin token is opaque: no bearerFormat claiming a JWT.
      expect(json.body.components.securitySchemes).toEqual({
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'AGENT_ADMIN_TOKEN (an opaque token, not a JWT)',
        },
      });
      const routes = Object.entries(json.body.paths as Record<string, object>).flatMap(
        ([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
      );
      expect(routes.sort()).toEqual(
        [
          'POST /agent/messages',
          'POST /agent/sessions/abort',
          'GET /agent/sessions',
          'GET /agent/sessions/{sessionId}',
          'PUT /agent/sessions/{sessionId}',
          'POST /agent/sessions/{sessionId}/abort',
          'PUT /agent/sessions/{sessionId}/model',
          'POST /agent/sessions/clear',
          'DELETE /agent/sessions/{sessionId}',
          'GET /agent/sessions/{sessionId}/queue',
          'GET /agent/sessions/{sessionId}/usage',
          'GET /agent/sessions/{sessionId}/history',
          'GET /agent/sessions/{sessionId}/approvals',
          'POST /agent/sessions/{sessionId}/approvals/{callId}',
          'POST /agent/ui/chat',
          'POST /agent/ag-ui',
          'GET /agent/ui/chat/{sessionId}/stream',
          'GET /health',
          'GET /metrics',
        ].sort(),
      );
      expect(Object.keys(json.body.components.schemas)).toEqual(
        expect.arrayContaining([
          'MessageDto',
          'AbortDto',
          'ModelRefDto',
          'ClearDto',
          'ApproveDto',
          'ApprovalsResponse',
          'UiChatRequestDto',
          'RunAgentInputDto',
          'ErrorResponse',
        ]),
      );
      expect(ui.status).toBe(200);
      expect(ui.text).toContain('swagger');
    });
  });

  describe('auth: admin routes need the bearer token (401), public ones do not', () => {
    it.each(ADMIN_ROUTES)(
      '$method $path without a token: 401 in the error shape',
      async (route) => {
        const res = await a.http()[route.method](route.path).send(route.body);

        expect(res.status).toBe(401);
        expectErrorShape(res.body, 401);
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      },
    );

    it.each([
      ['a wrong token', `Bearer ${TEST_TOKEN}x`],
      ['a prefix of the token', `Bearer ${TEST_TOKEN.slice(0, -1)}`],
      ['another scheme', `Basic ${TEST_TOKEN}`],
      ['an empty bearer', 'Bearer '],
    ])('%s: 401', async (_, header) => {
      const res = await a.http().get('/agent/sessions/x/queue').set('Authorization', header);

      expect(res.status).toBe(401);
      expectErrorShape(res.body, 401);
    });

    it('the scheme is case-insensitive', async () => {
      const res = await a
        .http()
        .get('/agent/sessions/x/queue')
        .set('Authorization', `bearer ${TEST_TOKEN}`);

      expect(res.status).toBe(200);
    });

    it.each(['/health', '/metrics', '/docs-json'])('%s needs no token', async (path) => {
      expect((await a.http().get(path)).status).toBe(200);
    });
  });

  describe('validation: each DTO field, 400 naming the failing field', () => {
    const long = 'x'.repeat(257);
    const msg = { sessionId: 'v', content: 'c' };
    const cases: [string, string, string, object, string][] = [
      // [title, method, path, body, failing field]
      ['messages: sessionId missing', 'post', '/agent/messages', { content: 'c' }, 'sessionId'],
      [
        'messages: sessionId not a string',
        'post',
        '/agent/messages',
        { ...msg, sessionId: 5 },
        'sessionId',
      ],
      [
        'messages: sessionId blank',
        'post',
        '/agent/messages',
        { ...msg, sessionId: '  ' },
        'sessionId',
      ],
      [
        'messages: sessionId too long',
        'post',
        '/agent/messages',
        { ...msg, sessionId: long },
        'sessionId',
      ],
      ['messages: content missing', 'post', '/agent/messages', { sessionId: 'v' }, 'content'],
      [
        'messages: content not a string',
        'post',
        '/agent/messages',
        { ...msg, content: {} },
        'content',
      ],
      ['messages: userId not a string', 'post', '/agent/messages', { ...msg, userId: 1 }, 'userId'],
      ['messages: platform blank', 'post', '/agent/messages', { ...msg, platform: '' }, 'platform'],
      ['messages: source blank', 'post', '/agent/messages', { ...msg, source: '' }, 'source'],
      [
        'messages: actor not an object',
        'post',
        '/agent/messages',
        { ...msg, actor: 'me' },
        'actor',
      ],
      [
        'messages: actor.platform missing',
        'post',
        '/agent/messages',
        { ...msg, actor: { userId: 'u' } },
        'actor.platform',
      ],
      [
        'messages: actor.userId not a string',
        'post',
        '/agent/messages',
        { ...msg, actor: { platform: 'p', userId: 2 } },
        'actor.userId',
      ],
      [
        'messages: actor unknown field',
        'post',
        '/agent/messages',
        { ...msg, actor: { platform: 'p', userId: 'u', admin: true } },
        'actor.admin',
      ],
      [
        'messages: attachments not an array',
        'post',
        '/agent/messages',
        { ...msg, attachments: {} },
        'attachments',
      ],
      [
        'messages: attachments too many',
        'post',
        '/agent/messages',
        {
          ...msg,
          attachments: Array.from({ length: 33 }, () => ({ kind: 'file', data: 'data:,x' })),
        },
        'attachments',
      ],
      [
        'messages: attachments.kind unknown',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'pdf', data: 'data:,x' }] },
        'attachments.0.kind',
      ],
      [
        'messages: attachments.data missing',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'file' }] },
        'attachments.0.data',
      ],
      [
        'messages: attachments.data a file:// URL',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'file', data: 'file:///etc/passwd' }] },
        'attachments.0.data',
      ],
      [
        'messages: attachments.mimeType not a string',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'file', data: 'data:,x', mimeType: 1 }] },
        'attachments.0.mimeType',
      ],
      [
        'messages: attachments.name too long',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'file', data: 'data:,x', name: 'n'.repeat(1025) }] },
        'attachments.0.name',
      ],
      [
        'messages: attachments unknown field',
        'post',
        '/agent/messages',
        { ...msg, attachments: [{ kind: 'file', data: 'data:,x', size: 1 }] },
        'attachments.0.size',
      ],
      [
        'messages: sessionKind not a string',
        'post',
        '/agent/messages',
        { ...msg, sessionKind: 3 },
        'sessionKind',
      ],
      [
        'messages: unknown field refused',
        'post',
        '/agent/messages',
        { ...msg, nickname: 'n' },
        'nickname',
      ],
      [
        'messages: constructor key refused',
        'post',
        '/agent/messages',
        { ...msg, constructor: { a: 1 } },
        'constructor',
      ],
      [
        'messages: nested __proto__ key refused',
        'post',
        '/agent/messages',
        JSON.parse('{"sessionId":"v","content":"c","actor":{"__proto__":{"x":1}}}'),
        'actor.__proto__',
      ],
      ['messages: ?wait not a boolean', 'post', '/agent/messages?wait=maybe', msg, 'wait'],
      ['messages: unknown query parameter', 'post', '/agent/messages?limit=1', msg, 'limit'],
      ['messages: body not an object', 'post', '/agent/messages', [msg], 'sessionId'],
      ['abort: turnId not a string', 'post', '/agent/sessions/v/abort', { turnId: 1 }, 'turnId'],
      [
        'abort: queued not a boolean',
        'post',
        '/agent/sessions/v/abort',
        { queued: 'yes' },
        'queued',
      ],
      [
        'abort: reason too long',
        'post',
        '/agent/sessions/v/abort',
        { reason: 'r'.repeat(1001) },
        'reason',
      ],
      [
        'abort: by cannot be given',
        'post',
        '/agent/sessions/v/abort',
        { by: { platform: 'x', userId: 'y' } },
        'by',
      ],
      ['abort: :sessionId blank', 'post', '/agent/sessions/%20/abort', {}, 'sessionId'],
      ['session: model not an object', 'put', '/agent/sessions/v', { model: 'gpt' }, 'model'],
      ['session: model.model missing', 'put', '/agent/sessions/v', { model: {} }, 'model.model'],
      ['session: think not a boolean', 'put', '/agent/sessions/v', { think: 'yes' }, 'think'],
      [
        'session: maxToolIterations not an integer',
        'put',
        '/agent/sessions/v',
        { maxToolIterations: 1.5 },
        'maxToolIterations',
      ],
      [
        'session: historyLimit negative',
        'put',
        '/agent/sessions/v',
        { historyLimit: -1 },
        'historyLimit',
      ],
      ['session: unknown field', 'put', '/agent/sessions/v', { kind: 'room' }, 'kind'],
      ['history: limit 0', 'get', '/agent/sessions/v/history?limit=0', {}, 'limit'],
      ['history: limit over 1000', 'get', '/agent/sessions/v/history?limit=1001', {}, 'limit'],
      ['history: limit not a number', 'get', '/agent/sessions/v/history?limit=ten', {}, 'limit'],
      ['history: before blank', 'get', '/agent/sessions/v/history?before=%20', {}, 'before'],
      [
        'history: unknown query parameter',
        'get',
        '/agent/sessions/v/history?offset=3',
        {},
        'offset',
      ],
      [
        'stop all: turnId cannot be given',
        'post',
        '/agent/sessions/abort',
        { turnId: 't' },
        'turnId',
      ],
      ['stop all: queued not a boolean', 'post', '/agent/sessions/abort', { queued: 1 }, 'queued'],
      [
        'stop all: reason too long',
        'post',
        '/agent/sessions/abort',
        { reason: 'r'.repeat(1001) },
        'reason',
      ],
      ['model: model missing', 'put', '/agent/sessions/v/model', {}, 'model'],
      ['model: model blank', 'put', '/agent/sessions/v/model', { model: ' ' }, 'model'],
      [
        'model: provider not a string',
        'put',
        '/agent/sessions/v/model',
        { model: 'm', provider: 1 },
        'provider',
      ],
      [
        'model: unknown field',
        'put',
        '/agent/sessions/v/model',
        { model: 'm', think: true },
        'think',
      ],
      [
        'model: :sessionId too long',
        'put',
        `/agent/sessions/${long}/model`,
        { model: 'm' },
        'sessionId',
      ],
      [
        'clear: sessionIds not an array',
        'post',
        '/agent/sessions/clear',
        { sessionIds: 'v' },
        'sessionIds',
      ],
      [
        'clear: sessionIds with a non-string',
        'post',
        '/agent/sessions/clear',
        { sessionIds: ['v', 1] },
        'sessionIds',
      ],
      [
        'clear: sessionIds with a blank id',
        'post',
        '/agent/sessions/clear',
        { sessionIds: [''] },
        'sessionIds',
      ],
      ['clear: reason not a string', 'post', '/agent/sessions/clear', { reason: 1 }, 'reason'],
      ['clear: unknown field', 'post', '/agent/sessions/clear', { all: true }, 'all'],
      ['delete: :sessionId blank', 'delete', '/agent/sessions/%09', {}, 'sessionId'],
      ['queue: :sessionId too long', 'get', `/agent/sessions/${long}/queue`, {}, 'sessionId'],
    ];

    it.each(cases)('%s', async (_, method, path, body, field) => {
      const res = await (a.http() as any)[method](path).set(a.auth).send(body);

      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(Object.keys(res.body.fields)).toContain(field);
    });
  });

  describe('bodies: malformed JSON 400, oversized 413, not JSON 415, too deep 400, unknown route 404', () => {
    it('malformed JSON: 400 in the error shape', async () => {
      const res = await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .set('Content-Type', 'application/json')
        .send('{"sessionId": "x", ');

      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
    });

    it('oversized body (over the 2mb default limit): 413 in the error shape', async () => {
      const res = await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .send({ sessionId: 'big', content: 'x'.repeat(2 * 1024 * 1024 + 1) });

      expect(res.status).toBe(413);
      expectErrorShape(res.body, 413);
    });

    it('a body that is not JSON: 415 in the error shape', async () => {
      const res = await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .set('Content-Type', 'text/plain')
        .send('sessionId=x');

      expect(res.status).toBe(415);
      expectErrorShape(res.body, 415);
    });

    it.each([
      [
        'nested 10000 levels deep',
        `{"sessionId":"d","content":"c","x":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
      ],
      [
        'with 20000 values',
        JSON.stringify({ sessionId: 'd', content: 'c', x: Array(20_000).fill(0) }),
      ],
    ])('a body %s: 400 naming the body, never a stack overflow', async (_, body) => {
      const res = await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .set('Content-Type', 'application/json')
        .send(body);

      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(Object.keys(res.body.fields)).toEqual(['body']);
    });

    it('an unknown route: 404 in the error shape', async () => {
      const res = await a.http().get('/agent/nothing').set(a.auth);

      expect(res.status).toBe(404);
      expectErrorShape(res.body, 404);
    });
  });
});

describe('rate limits (@nestjs/throttler)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start({
      api: {
        rateLimits: { public: { limit: 2, ttlMs: 60_000 }, admin: { limit: 3, ttlMs: 60_000 } },
      },
    });
  });
  afterAll(() => a?.close());

  it('/health is never rate limited: past the public limit it still answers 200', async () => {
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await a.http().get('/health')).status);

    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
  });

  it.each(['/metrics', '/docs-json'])(
    'public route %s: 429 in the error shape past the limit',
    async (path) => {
      const statuses = [];
      for (let i = 0; i < 2; i++) statuses.push((await a.http().get(path)).status);
      const limited = await a.http().get(path);

      expect(statuses).toEqual([200, 200]);
      expect(limited.status).toBe(429);
      expectErrorShape(limited.body, 429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    },
  );

  it('/agent routes have their own limit (429 with Retry-After past it)', async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      statuses.push((await a.http().get('/agent/sessions/r/queue').set(a.auth)).status);
    }
    const limited = await a.http().get('/agent/sessions/r/queue').set(a.auth);

    expect(statuses).toEqual([200, 200, 200]);
    expect(limited.status).toBe(429);
    expectErrorShape(limited.body, 429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('health when the model provider is down', () => {
  it('/health: 503 with the same report, model down', async () => {
    const gone = await FakeOpenAiServer.start();
    const url = gone.url;
    await gone.close();
    const a = await ApiApp.start({ env: { LLM_BASE_URL: url } });
    try {
      const res = await a.http().get('/health');

      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({
        status: 'error',
        info: { store: { status: 'up' }, queue: { status: 'up' } },
        error: { model: { status: 'down' } },
      });
    } finally {
      await a.close();
    }
  });
});

describe('S9: application shutdown during a running turn', () => {
  it('the turn ends aborted, the waiting ?wait=true request gets its answer, new requests are refused', async () => {
    const a = await ApiApp.start();
    a.server.enqueue({ text: 'held answer', chunks: 2, hold: true });
    const called = a.nextModelCall();
    const waiting = a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .send({ sessionId: 'shutdown', content: 'go' })
      .then((r) => r);
    await called;
    const draining = a.nextEvent('agent:turn:end');

    const closed = a.close();
    await draining;
    const late = await a
      .http()
      .get('/health')
      .then((r) => r.status)
      .catch((error: NodeJS.ErrnoException) => error.code);
    const res = await waiting;
    await closed;

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    // Stopped accepting: the listener is closed (or, on an open connection, 503).
    expect(['ECONNREFUSED', 'ECONNRESET', 503]).toContain(late);
  });
});
