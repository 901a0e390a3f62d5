import { ApiApp } from '../support/api-app';

/** Control characters of each range refused in ids: C0 (`\n`, ESC, NUL), DEL and C1 (NEL). */
const CONTROL_CHARS: [string, string][] = [
  ['a newline', '\n'],
  ['ESC', '\u001b'],
  ['NUL', '\u0000'],
  ['DEL', '\u007f'],
  ['C1 NEL', '\u0085'],
];

describe('ids with control characters: 400 naming the field', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  const message = { sessionId: 'cc', content: 'hi' };
  const bodyCases = CONTROL_CHARS.flatMap(([name, char]) => [
    ...(['sessionId', 'userId', 'platform', 'source'] as const).map(
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
});
