import { ApiApp, recordSocket, type AgentClient } from '../support/api-app';

/** Resolves with the error of a refused handshake. */
function refusal(socket: AgentClient): Promise<Error & { data?: any }> {
  return new Promise((resolve, reject) => {
    socket.once('connect_error', resolve);
    socket.once('connect', () => reject(new Error('the handshake was accepted')));
  });
}

const LOOSE = { limit: 1_000_000, ttlMs: 60_000 };

describe('wrong tokens never lock the right one out (README: REST API, rate limits)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start({
      api: { rateLimits: { public: LOOSE, admin: LOOSE, auth: { limit: 3, ttlMs: 60_000 } } },
    });
  });
  afterAll(() => a?.close());

  it('past the auth limit wrong tokens get 429; the right token from the same address still gets 200', async () => {
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      const res = await a
        .http()
        .get('/agent/sessions/lock/queue')
        .set('Authorization', `Bearer guess-${i}`);
      statuses.push(res.status);
    }
    const lockedOut = await a.http().get('/agent/sessions/lock/queue');
    const right = await a.http().get('/agent/sessions/lock/queue').set(a.auth);

    expect(statuses).toEqual([401, 401, 401, 429, 429, 429]);
    expect(lockedOut.status).toBe(429);
    expect(Number(lockedOut.headers['retry-after'])).toBeGreaterThan(0);
    expect(right.status).toBe(200);
  });

  it('the socket handshake too: a wrong token is refused with 429, the right one connects', async () => {
    const wrong = await refusal(a.socket({ token: 'guess' }));
    const socket = await a.connect();

    expect(wrong.data).toMatchObject({ statusCode: 429, retryAfter: expect.any(Number) });
    expect(socket.connected).toBe(true);
  });
});

describe('Socket.IO rate limits per client address (README: Socket.IO)', () => {
  it('handshakes past the admin limit: connect_error with a 429 body', async () => {
    const a = await ApiApp.start({
      api: { rateLimits: { public: LOOSE, auth: LOOSE, admin: { limit: 3, ttlMs: 60_000 } } },
    });
    try {
      for (let i = 0; i < 3; i++) await a.connect();

      const error = await refusal(a.socket());

      expect(error.message).toMatch(/Too many requests/);
      expect(error.data).toEqual({
        statusCode: 429,
        error: 'Too Many Requests',
        message: expect.stringMatching(/Too many requests/),
        retryAfter: expect.any(Number),
      });
    } finally {
      await a.close();
    }
  });

  it('events past the admin limit: acked with a 429 body, not handled, the socket stays open', async () => {
    const a = await ApiApp.start({
      api: { rateLimits: { public: LOOSE, auth: LOOSE, admin: { limit: 3, ttlMs: 60_000 } } },
    });
    try {
      const socket = await a.connect();
      const acks = [];
      for (let i = 0; i < 3; i++) acks.push(await socket.emitWithAck('subscribe', { all: true }));

      const refused: any = await socket.emitWithAck('message', { sessionId: 'ev', content: 'x' });

      expect(acks).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
      expect(refused).toEqual({
        statusCode: 429,
        error: 'Too Many Requests',
        message: expect.stringMatching(/Too many requests/),
        retryAfter: expect.any(Number),
      });
      expect(socket.connected).toBe(true);
      expect(a.server.requests).toHaveLength(0);
    } finally {
      await a.close();
    }
  });
});

describe('the body limit holds on every door (README: REST API, Socket.IO)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start({ api: { bodyLimit: '16kb' } });
  });
  afterAll(() => a?.close());

  it('a socket message over the limit: acked with a 413, the connection stays open and works', async () => {
    const socket = await a.connect();
    const events = recordSocket(socket);
    let disconnected = false;
    socket.on('disconnect', () => (disconnected = true));

    const big: any = await socket.emitWithAck('message', {
      sessionId: 'big',
      content: 'x'.repeat(20 * 1024),
    });
    a.server.enqueue({ text: 'small one' });
    const small = await socket.emitWithAck('message', { sessionId: 'small', content: 'hi' });

    expect(big).toEqual({
      statusCode: 413,
      error: 'Payload Too Large',
      message: `The payload is larger than the limit of ${16 * 1024} bytes`,
    });
    expect(small).toEqual({ accepted: true });
    expect(socket.connected).toBe(true);
    expect(disconnected).toBe(false);
    expect(events).toEqual([]);
  });

  it('REST: the same body answers 413', async () => {
    const res = await a
      .http()
      .post('/agent/messages')
      .set(a.auth)
      .send({ sessionId: 'big', content: 'x'.repeat(20 * 1024) });

    expect(res.status).toBe(413);
  });
});
