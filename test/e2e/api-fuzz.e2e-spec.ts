import fc from 'fast-check';
import { ApiApp, TEST_TOKEN } from '../support/api-app';

/** Runs per route (and per socket event); at least 200 in CI. */
const RUNS = Math.max(Number(process.env.FUZZ_RUNS ?? 0) || 200, process.env.CI ? 200 : 0);

type Method = 'get' | 'post' | 'put' | 'delete';

/** Every route of the README's REST reference; `:id` is replaced by a fuzzed session id. */
const ROUTES: { method: Method; path: string }[] = [
  { method: 'post', path: '/agent/messages' },
  { method: 'post', path: '/agent/sessions/:id/abort' },
  { method: 'put', path: '/agent/sessions/:id/model' },
  { method: 'post', path: '/agent/sessions/clear' },
  { method: 'get', path: '/agent/sessions' },
  { method: 'delete', path: '/agent/sessions/:id' },
  { method: 'get', path: '/agent/sessions/:id/queue' },
  { method: 'get', path: '/agent/sessions/:id/usage' },
  { method: 'get', path: '/agent/sessions/:id/history' },
  { method: 'get', path: '/health' },
  { method: 'get', path: '/metrics' },
];

const text = fc.string({ maxLength: 30 });
const sessionIds = fc.constantFrom('fuzz-1', 'fuzz-2', 'fuzz-3');

/** A value of any JSON type, small. */
const anyJson = fc.jsonValue({ maxDepth: 3 });

/** Bodies that look like the DTOs, with fields of any type, present or not. */
const plausible = fc.record(
  {
    sessionId: fc.oneof(sessionIds, anyJson),
    content: fc.oneof(text, anyJson),
    userId: fc.oneof(text, anyJson),
    platform: fc.oneof(text, anyJson),
    source: fc.oneof(text, anyJson),
    actor: fc.oneof(fc.record({ platform: text, userId: text }), anyJson),
    attachments: fc.oneof(
      fc.array(
        fc.record(
          {
            kind: fc.oneof(fc.constantFrom('image', 'audio', 'video', 'file'), anyJson),
            data: fc.oneof(
              fc.constantFrom('data:,x', 'https://x.test/a', 'file:///etc/passwd'),
              anyJson,
            ),
            mimeType: fc.oneof(text, anyJson),
            name: fc.oneof(text, anyJson),
          },
          { requiredKeys: [] },
        ),
        { maxLength: 3 },
      ),
      anyJson,
    ),
    sessionKind: fc.oneof(fc.constantFrom('room', 'web', 'api'), anyJson),
    turnId: fc.oneof(text, anyJson),
    queued: fc.oneof(fc.boolean(), anyJson),
    reason: fc.oneof(text, anyJson),
    provider: fc.oneof(fc.constantFrom('openai', 'nope'), anyJson),
    model: fc.oneof(fc.constantFrom('test-model', 'other'), anyJson),
    sessionIds: fc.oneof(fc.array(sessionIds, { maxLength: 3 }), anyJson),
    all: anyJson,
    ['__proto__']: fc.object({ maxDepth: 1 }),
    constructor: anyJson,
  },
  { requiredKeys: [] },
);

/** A non-blank short string (valid as an id or name). */
const word = fc.string({ minLength: 1, maxLength: 20 }).filter((v) => /\S/.test(v));

/** Bodies of the right shape for each route, with values that are mostly valid. */
const SHAPED: Record<string, fc.Arbitrary<object>> = {
  '/agent/messages': fc.record(
    {
      sessionId: sessionIds,
      content: text,
      userId: word,
      platform: fc.constantFrom('web', 'api', ''),
      source: fc.constantFrom('scheduler', 'webhook'),
      actor: fc.record({ platform: word, userId: word }),
      attachments: fc.array(
        fc.record({
          kind: fc.constantFrom('image', 'file'),
          data: fc.constantFrom('data:,x', 'https://x.test/a'),
        }),
        { maxLength: 2 },
      ),
      sessionKind: fc.constantFrom('room', 'web', 'api'),
    },
    { requiredKeys: ['sessionId', 'content'] },
  ),
  '/agent/sessions/:id/abort': fc.record(
    { turnId: word, queued: fc.boolean(), reason: text },
    { requiredKeys: [] },
  ),
  '/agent/sessions/:id/model': fc.record(
    {
      provider: fc.constantFrom('openai', 'nope'),
      model: fc.constantFrom('test-model', 'other', ''),
    },
    { requiredKeys: ['model'] },
  ),
  '/agent/sessions/clear': fc.record(
    { sessionIds: fc.array(sessionIds, { maxLength: 3 }), reason: text },
    { requiredKeys: [] },
  ),
};

/** What is sent as the body: JSON text of anything, or text that is no JSON at all. */
const rawBodyFor = (path: string) =>
  fc.oneof(
    { arbitrary: (SHAPED[path] ?? fc.constant({})).map((b) => JSON.stringify(b)), weight: 4 },
    { arbitrary: plausible.map((b) => JSON.stringify(b)), weight: 2 },
    { arbitrary: anyJson.map((b) => JSON.stringify(b)), weight: 1 },
    { arbitrary: fc.string({ maxLength: 60 }), weight: 1 },
    {
      arbitrary: fc
        .integer({ min: 20, max: 5000 })
        .map((d) => `{"sessionId":"fuzz-1","content":"c","x":${'['.repeat(d)}${']'.repeat(d)}}`),
      weight: 1,
    },
    {
      arbitrary: fc.constantFrom(
        '',
        '{',
        '{"sessionId":',
        'null',
        'true',
        '[]',
        '"x"',
        '{"a":1}}',
        '\u0000',
      ),
      weight: 1,
    },
  );

/** A path segment: a plain or odd session id, percent-encoded, or raw odd encodings. */
const segment = fc.oneof(
  { arbitrary: sessionIds, weight: 4 },
  { arbitrary: fc.string({ maxLength: 20 }).map(encodeURIComponent), weight: 1 },
  { arbitrary: fc.string({ minLength: 257, maxLength: 300 }).map(encodeURIComponent), weight: 1 },
  {
    arbitrary: fc.constantFrom('%', '%FF', '%E0%A4%A', '%2F', '..', '%00', '%20', 'clear'),
    weight: 1,
  },
);

const query = fc.oneof(
  { arbitrary: fc.constantFrom('', '?wait=true'), weight: 4 },
  fc.constantFrom('?wait=false', '?wait=1', '?wait=', '?wait=true&wait=false', '?wait[a]=1'),
  fc
    .dictionary(fc.string({ minLength: 1, maxLength: 8 }), text, { maxKeys: 3 })
    .map((q) => `?${new URLSearchParams(q).toString()}`),
);

/** Queries of the session list: its fields with odd values, or any fields. */
const listQuery = fc.oneof(
  fc.constantFrom('', '?limit=1', '?limit=0', '?limit=-1', '?limit=1e3', '?limit[a]=1'),
  fc.constantFrom('?state=held', '?state=', '?state=idle&state=held', '?cursor=', '?cursor=%'),
  fc
    .tuple(fc.string({ maxLength: 40 }), fc.string({ maxLength: 8 }))
    .map(
      ([at, id]) =>
        `?limit=2&cursor=${Buffer.from(JSON.stringify([at, id])).toString('base64url')}`,
    ),
  fc
    .string({ maxLength: 60 })
    .map((c) => `?cursor=${encodeURIComponent(Buffer.from(c).toString('base64url'))}`),
  query,
);

/** Header values: visible ASCII (what an HTTP client can send at all). */
const headerValue = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});

/** Mostly what a real client sends (JSON, the admin token), sometimes anything. */
const headers = fc
  .record(
    {
      'content-type': fc.oneof(
        { arbitrary: fc.constant('application/json'), weight: 8 },
        {
          arbitrary: fc.constantFrom(
            'application/json; charset=utf-8',
            'application/json; charset=latin1',
            'application/json; charset=utf-16',
            'application/merge-patch+json',
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
          ),
          weight: 1,
        },
        { arbitrary: headerValue, weight: 1 },
      ),
      authorization: fc.oneof(
        { arbitrary: fc.constant(`Bearer ${TEST_TOKEN}`), weight: 8 },
        { arbitrary: fc.constant(`bearer ${TEST_TOKEN}`), weight: 1 },
        { arbitrary: headerValue, weight: 1 },
        { arbitrary: headerValue.map((v) => `Bearer ${v}`), weight: 1 },
      ),
      extra: fc.dictionary(
        fc.constantFrom(
          'content-encoding',
          'accept',
          'accept-encoding',
          'x-forwarded-for',
          'origin',
          'cookie',
          'user-agent',
          'x-fuzz',
        ),
        fc.oneof(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x'), headerValue),
        { maxKeys: 3 },
      ),
    },
    { requiredKeys: ['content-type', 'authorization'] },
  )
  .map(({ extra, ...main }) => ({ ...extra, ...main }));

/** The error shape of every error answer. */
function isErrorShape(body: any, status: number): boolean {
  return (
    body !== null &&
    typeof body === 'object' &&
    body.statusCode === status &&
    typeof body.error === 'string' &&
    typeof body.message === 'string'
  );
}

describe('fuzz: random JSON bodies and headers on every route (no 5xx, no crash)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  it.each(ROUTES)(`$method $path: ${RUNS} random requests, none answered 5xx`, async (route) => {
    await fc.assert(
      fc.asyncProperty(
        segment,
        route.path === '/agent/sessions' ? listQuery : query,
        headers,
        rawBodyFor(route.path),
        async (id, q, head, body) => {
          const queried = route.path === '/agent/messages' || route.path === '/agent/sessions';
          const path = route.path.replace(':id', id) + (queried ? q : '');
          let req = a.http()[route.method](path).timeout(10_000);
          for (const [name, value] of Object.entries(head)) req = req.set(name, value);
          const res = await (route.method === 'get' && !body ? req : req.send(body));

          expect(res.status).toBeLessThan(500);
          if (res.status >= 400) expect(isErrorShape(res.body, res.status)).toBe(true);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it.each(['subscribe', 'message', 'abort'] as const)(
    `socket event %s: ${RUNS} random payloads, each acked without a 5xx`,
    async (event) => {
      const socket = await a.connect();
      await fc.assert(
        fc.asyncProperty(fc.oneof(plausible, anyJson), async (payload) => {
          const ack: any = await (socket as any).timeout(10_000).emitWithAck(event, payload);

          expect(ack).toEqual(expect.any(Object));
          if ('statusCode' in ack) {
            expect(ack.statusCode).toBeLessThan(500);
            expect(isErrorShape(ack, ack.statusCode)).toBe(true);
          }
        }),
        { numRuns: RUNS },
      );
      expect(socket.connected).toBe(true);
    },
  );

  it('afterwards the server still answers: /health 200 and a turn end to end', async () => {
    const health = await a.http().get('/health');
    const turn = await a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .send({ sessionId: 'after-fuzz', content: 'still there?' });

    expect(health.status).toBe(200);
    expect(turn.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
  });
});
