import { createServer, type Server, type Socket } from 'node:net';
import { AgentService } from '../../src/agent';
import { AgentApiService } from '../../src/api';
import { StoreUnavailableError, type Settlement } from '../../src/contracts';
import { ApiApp } from '../support/api-app';
import { DRIVER_TEXT, SwitchableStores } from '../support/api-stores';

/** The error shape, with the extra keys a case adds. */
function expectErrorBody(body: any, statusCode: number, extra: string[] = []): void {
  expect(body).toEqual(
    expect.objectContaining({ statusCode, error: expect.any(String), message: expect.any(String) }),
  );
  expect(Object.keys(body).sort()).toEqual(['error', 'message', 'statusCode', ...extra].sort());
}

/** Control characters of each range refused in ids: C0 (`\n`, ESC, NUL), DEL and C1 (NEL). */
const CONTROL_CHARS: [string, string][] = [
  ['a newline', '\n'],
  ['ESC', '\u001b'],
  ['NUL', '\u0000'],
  ['DEL', '\u007f'],
  ['C1 NEL', '\u0085'],
];

describe('?wait=true answers (README: REST API)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());
  afterEach(() => jest.restoreAllMocks());

  const postAndWait = (body: object) => a.postAndWait(body);

  it('outcome error: the answer carries the error notice sent to the session', async () => {
    a.server.enqueue({ status: 400, body: { error: { message: 'bad request' } } });

    const res = await postAndWait({ sessionId: 'wait-error', content: 'hi' });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      settled: 'turn',
      turnId: expect.any(String),
      outcome: 'error',
      error: expect.stringMatching(/\S/),
    });
  });

  it('an input with an id: accepted, and the id reaches the agent', async () => {
    const handle = jest.spyOn(a.app.get(AgentService), 'handleMessage');
    a.server.enqueue({ text: 'with id' });

    const res = await postAndWait({ id: 'input-42', sessionId: 'wait-id', content: 'hi' });

    expect(res.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
    expect(handle).toHaveBeenCalledWith(expect.objectContaining({ id: 'input-42' }));
  });

  it.each([
    ['queue-full', 429, 2],
    ['store-unavailable', 503, 5],
  ] as const)(
    'dropped with reason %s: %d with Retry-After and the reason',
    async (reason, status, retryAfter) => {
      jest
        .spyOn(a.app.get(AgentService), 'handleMessage')
        .mockResolvedValueOnce({ settled: 'dropped', reason } satisfies Settlement);

      const res = await postAndWait({ sessionId: 'wait-refused', content: 'hi' });

      expect(res.status).toBe(status);
      expect(res.headers['retry-after']).toBe(String(retryAfter));
      expectErrorBody(res.body, status, ['reason']);
      expect(res.body.reason).toBe(reason);
    },
  );

  it('OpenAPI: the settled answer has error and reason, the route documents 429 and 503', async () => {
    const { body } = await a.http().get('/docs-json');

    const settled = body.components.schemas.SettledResponse.properties;
    expect(Object.keys(settled)).toEqual(expect.arrayContaining(['error', 'reason']));
    expect(settled.reason.enum).toEqual(
      expect.arrayContaining(['queue-full', 'store-unavailable']),
    );
    expect(Object.keys(body.paths['/agent/messages'].post.responses)).toEqual(
      expect.arrayContaining(['200', '202', '429', '503']),
    );
    expect(Object.keys(body.components.schemas.MessageDto.properties)).toContain('id');
  });

  it('dropped for another reason: 200 with the reason', async () => {
    jest
      .spyOn(a.app.get(AgentService), 'handleMessage')
      .mockResolvedValueOnce({ settled: 'dropped', reason: 'cleared' });

    const res = await postAndWait({ sessionId: 'wait-cleared', content: 'hi' });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ settled: 'dropped', reason: 'cleared' });
  });
});

describe('an unavailable store: 503 with Retry-After naming the store, never a 500', () => {
  const stores = new SwitchableStores();
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start({ override: stores.override });
    a.server.enqueue({ text: 'before the outage' });
    await a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .send({ sessionId: 'down', content: 'hi' });
  });
  afterEach(() => {
    stores.mode = 'ok';
    jest.restoreAllMocks();
  });
  afterAll(() => a?.close());

  it.each([
    ['history', 'get', '/agent/sessions/down/history', undefined],
    ['usage', 'get', '/agent/sessions/down/usage', undefined],
    ['clear', 'post', '/agent/sessions/clear', { sessionIds: ['down'] }],
    ['delete', 'delete', '/agent/sessions/down', undefined],
    ['model assignment', 'put', '/agent/sessions/down/model', { model: 'test-model' }],
  ] as const)('%s: 503, the store named, no driver text', async (_, method, path, body) => {
    stores.mode = 'fail';

    const res = await (a.http() as any)[method](path).set(a.auth).send(body);

    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expectErrorBody(res.body, 503);
    expect(res.body.message).toMatch(/^The (sessions|history) store is unavailable/);
    expect(JSON.stringify(res.body)).not.toContain('ECONNREFUSED');
    expect(JSON.stringify(res.body)).not.toContain(DRIVER_TEXT);
  });

  it('model assignment failing otherwise: 422 in a plain sentence, not the store text', async () => {
    const failure = new Error(`SQLITE_CONSTRAINT: ${DRIVER_TEXT}`);
    jest.spyOn(a.app.get(AgentService), 'assignModel').mockRejectedValueOnce(failure);

    const res = await a
      .http()
      .put('/agent/sessions/down/model')
      .set(a.auth)
      .send({ model: 'test-model' });

    expect(res.status).toBe(422);
    expectErrorBody(res.body, 422);
    expect(res.body.message).toBe(
      'The model could not be assigned: the session store refused the change',
    );
  });

  it('socket message: acked with the 503 error body and retryAfter', async () => {
    const socket = await a.connect();
    jest
      .spyOn(a.app.get(AgentApiService), 'submit')
      .mockRejectedValueOnce(new StoreUnavailableError('inbox', 'accept an input'));

    const ack: any = await socket.emitWithAck('message', { sessionId: 'down', content: 'hi' });

    expect(ack).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The inbox store is unavailable (accept an input)',
      retryAfter: 5,
    });
    expect(socket.connected).toBe(true);
  });

  it('/health: answers within 2 s while the store hangs, the store down "timed out after 1.5 s"', async () => {
    stores.mode = 'hang';
    const started = Date.now();

    const [first, second] = await Promise.all([a.http().get('/health'), a.http().get('/health')]);
    const elapsed = Date.now() - started;

    expect(elapsed).toBeLessThan(2000);
    for (const res of [first, second]) {
      expect(res.status).toBe(503);
      expect(res.body.error.store).toEqual({ status: 'down', message: 'timed out after 1.5 s' });
      expect(res.body.info.queue.status).toBe('up');
    }
  });
});

describe('/health when the model endpoint accepts connections and never answers', () => {
  let silent: Server;
  const held: Socket[] = [];
  let a: ApiApp;
  beforeAll(async () => {
    silent = createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    a = await ApiApp.start({ env: { LLM_BASE_URL: `http://127.0.0.1:${port}/v1` } });
  });
  afterAll(async () => {
    await a?.close();
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('answers within 2 s, the model down "timed out after 1.5 s"', async () => {
    const started = Date.now();

    const res = await a.http().get('/health');
    const elapsed = Date.now() - started;

    expect(elapsed).toBeLessThan(2000);
    expect(res.status).toBe(503);
    expect(res.body.error.model).toEqual({
      status: 'down',
      message: expect.stringContaining('timed out after 1.5 s'),
    });
    expect(res.body.info.store.status).toBe('up');
  });
});

describe('ids with control characters: 400 naming the field', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  const message = { sessionId: 'cc', content: 'hi' };
  const bodyCases = CONTROL_CHARS.flatMap(([name, char]) => [
    ...(['sessionId', 'userId', 'platform', 'source', 'id'] as const).map(
      (field) =>
        [
          `POST /agent/messages ${field} with ${name}`,
          'post',
          '/agent/messages',
          { ...message, [field]: `x${char}y` },
          field,
        ] as const,
    ),
    [
      `abort turnId with ${name}`,
      'post',
      '/agent/sessions/cc/abort',
      { turnId: `t${char}` },
      'turnId',
    ] as const,
    [
      `clear sessionIds with ${name}`,
      'post',
      '/agent/sessions/clear',
      { sessionIds: [`s${char}`] },
      'sessionIds',
    ] as const,
    [
      `actor.userId with ${name}`,
      'post',
      '/agent/messages',
      { ...message, actor: { platform: 'web', userId: `u${char}` } },
      'actor.userId',
    ] as const,
  ]);

  it.each(bodyCases)('%s', async (_, method, path, body, field) => {
    const res = await (a.http() as any)[method](path).set(a.auth).send(body);

    expect(res.status).toBe(400);
    expect(res.body.fields[field]).toEqual([expect.stringMatching(/control characters/)]);
  });

  const paths = [
    ['post', 'abort'],
    ['put', 'model'],
    ['delete', ''],
    ['get', 'queue'],
    ['get', 'usage'],
    ['get', 'history'],
  ] as const;
  const pathCases = CONTROL_CHARS.flatMap(([name, char]) =>
    paths.map(
      ([method, route]) =>
        [
          `${method.toUpperCase()} /agent/sessions/:sessionId${route ? `/${route}` : ''} with ${name}`,
          method,
          `/agent/sessions/${encodeURIComponent(`s${char}`)}${route ? `/${route}` : ''}`,
        ] as const,
    ),
  );

  it.each(pathCases)('%s: 400 naming sessionId', async (_, method, path) => {
    const body = method === 'put' ? { model: 'm' } : method === 'post' ? {} : undefined;

    const res = await (a.http() as any)[method](path).set(a.auth).send(body);

    expect(res.status).toBe(400);
    expect(res.body.fields).toEqual({
      sessionId: ['sessionId must not contain control characters'],
    });
  });

  it.each([
    ['message', 'sessionId', { ...message, sessionId: 'a\nb' }],
    ['message', 'userId', { ...message, userId: 'u\u001b[31m' }],
    ['message', 'id', { ...message, id: 'i\u0000' }],
    ['subscribe', 'sessionId', { sessionId: 's\n' }],
    ['abort', 'turnId', { sessionId: 's', turnId: 't\u0085' }],
  ] as const)(
    'socket %s with %s holding one: acked with a 400 naming it',
    async (event, field, payload) => {
      const socket = await a.connect();

      const ack: any = await (socket as any).emitWithAck(event, payload);

      expect(ack).toMatchObject({ statusCode: 400 });
      expect(ack.fields[field]).toEqual([expect.stringMatching(/control characters/)]);
    },
  );

  it('an id of 200 characters is accepted, one of 201 refused', async () => {
    a.server.enqueue({ text: 'ok' });
    const ok = await a
      .http()
      .post('/agent/messages')
      .set(a.auth)
      .send({ ...message, id: 'i'.repeat(200) });
    const long = await a
      .http()
      .post('/agent/messages')
      .set(a.auth)
      .send({ ...message, id: 'i'.repeat(201) });

    expect(ok.status).toBe(202);
    expect(long.status).toBe(400);
    expect(Object.keys(long.body.fields)).toEqual(['id']);
  });
});
