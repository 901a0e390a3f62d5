import { io } from 'socket.io-client';
import { AgentGateway } from '../../src/api';
import {
  ApiApp,
  TEST_TOKEN,
  nextSocketEvent,
  recordSocket,
  type AgentClient,
} from '../support/api-app';
import { rawConnection } from '../support/api-raw';

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

describe('HTTP server limits (README: Configuration)', () => {
  it('an incomplete request body is answered 408 and closed once requestTimeout has passed; a long answer is not cut', async () => {
    const a = await ApiApp.start({
      api: { http: { headersTimeoutMs: 500, requestTimeoutMs: 1000 } },
    });
    try {
      a.server.enqueue({ text: 'held past the request timeout', hold: true });
      const called = a.nextModelCall();
      const waiting = a
        .http()
        .post('/agent/messages?wait=true')
        .set(a.auth)
        .send({ sessionId: 'slow-answer', content: 'go' })
        .then((r) => r);
      await called;
      const raw = await rawConnection(a.url);

      raw.socket.write(
        'POST /agent/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          `Authorization: Bearer ${TEST_TOKEN}\r\nContent-Length: 100\r\n\r\n{"sessionId":`,
      );
      const { data, ms } = await raw.closed;
      a.server.release();
      const answer = await waiting;

      expect(data).toMatch(/^HTTP\/1\.1 408 /);
      expect(ms).toBeGreaterThanOrEqual(900);
      expect(ms).toBeLessThan(2500);
      // The ?wait=true answer was running all along, longer than requestTimeout.
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
    } finally {
      await a.close();
    }
  });

  it('past maxConnections a new connection is closed at once; the open ones keep working', async () => {
    const a = await ApiApp.start({ api: { http: { maxConnections: 2 } } });
    try {
      const request = 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n';
      const open = [await rawConnection(a.url), await rawConnection(a.url)];
      for (const connection of open) {
        connection.socket.write(request);
        expect(await connection.nextAnswer()).toMatch(/^HTTP\/1\.1 200 /);
      }

      const third = await rawConnection(a.url);
      third.socket.write(request);
      const refused = await third.closed;
      open[0].socket.write(request);

      expect(refused.data).toBe('');
      expect(await open[0].nextAnswer()).toMatch(/^HTTP\/1\.1 200 /);
      for (const connection of open) connection.socket.destroy();
    } finally {
      await a.close();
    }
  });
});

describe('the queue event: only to subscribers, coalesced per session (README: Socket.IO)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());
  afterEach(() => jest.restoreAllMocks());

  it('a burst of 200 queued inputs: far fewer queue messages, the last one with the final list; a non-subscriber gets none', async () => {
    const subscriber = await a.connect();
    const bystander = await a.connect();
    await subscriber.emitWithAck('subscribe', { sessionId: 'burst' });
    await bystander.emitWithAck('subscribe', { sessionId: 'elsewhere' });
    const seen = recordSocket(subscriber);
    const unseen = recordSocket(bystander);
    a.server.enqueue({ text: 'held while the queue grows', chunks: 2, hold: true });
    const called = a.nextModelCall();
    await subscriber.emitWithAck('message', { sessionId: 'burst', content: 'first' });
    await called;
    const full = nextSocketEvent(subscriber, 'queue', (e) => e.waiting.length === 200);

    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        subscriber.emitWithAck('message', {
          sessionId: 'burst',
          content: `queued ${i}`,
          source: 'scheduler',
        }),
      ),
    );
    await full;
    const queues = seen.filter((e) => e.event === 'queue').map((e) => e.payload);
    await a.http().post('/agent/sessions/burst/abort').set(a.auth).send({ queued: true });
    a.server.release();

    expect(queues.length).toBeLessThanOrEqual(40);
    expect(queues.at(-1).waiting).toHaveLength(200);
    expect(queues.at(-1).waiting.at(-1)).toMatchObject({ content: 'queued 199' });
    expect(unseen.filter((e) => e.event === 'queue')).toEqual([]);
  });

  it('200 agent:queue events at once: the leading message and one trailing one with the last list', async () => {
    const subscriber = await a.connect();
    await subscriber.emitWithAck('subscribe', { sessionId: 'synthetic' });
    const seen = recordSocket(subscriber);
    const last = nextSocketEvent(subscriber, 'queue', (e) => e.waiting.length === 200);

    for (let n = 1; n <= 200; n++) {
      a.emitter.emit('agent:queue', {
        sessionId: 'synthetic',
        waiting: Array.from({ length: n }, (_, i) => ({ sessionId: 'synthetic', content: `${i}` })),
      });
    }
    await last;

    const queues = seen.filter((e) => e.event === 'queue').map((e) => e.payload.waiting.length);
    expect(queues).toEqual([1, 200]);
  });

  it('without subscribers agent:queue sends and encodes nothing', async () => {
    const emit = jest.spyOn(a.app.get(AgentGateway), 'emitToSession');

    for (let n = 0; n < 1000; n++) {
      a.emitter.emit('agent:queue', { sessionId: 'nobody', waiting: [] });
    }

    expect(emit).not.toHaveBeenCalled();
  });
});

describe('behind a proxy (TRUST_PROXY, README: Deployment)', () => {
  const AUTH_2 = { public: LOOSE, admin: LOOSE, auth: { limit: 2, ttlMs: 60_000 } };

  /** Wrong-token requests from a forwarded address; their statuses. */
  async function guesses(a: ApiApp, forwardedFor: string, count: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < count; i++) {
      const res = await a
        .http()
        .get('/agent/sessions/p/queue')
        .set('X-Forwarded-For', forwardedFor)
        .set('Authorization', `Bearer guess-${i}`);
      statuses.push(res.status);
    }
    return statuses;
  }

  /** A handshake with a wrong token from a forwarded address; the refusal's status. */
  async function handshake(a: ApiApp, forwardedFor: string): Promise<number> {
    const socket: AgentClient = io(`${a.url}/agent`, {
      auth: { token: 'guess' },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      extraHeaders: { 'X-Forwarded-For': forwardedFor },
    });
    try {
      return (await refusal(socket)).data.statusCode as number;
    } finally {
      socket.disconnect();
    }
  }

  it('trusted (loopback): each forwarded client address has its own limit, on REST and at the handshake', async () => {
    const a = await ApiApp.start({ api: { rateLimits: AUTH_2 }, env: { TRUST_PROXY: 'loopback' } });
    try {
      expect(await guesses(a, '203.0.113.1', 3)).toEqual([401, 401, 429]);
      expect(await guesses(a, '203.0.113.2', 1)).toEqual([401]);
      expect(await handshake(a, '203.0.113.1')).toBe(429);
      expect(await handshake(a, '203.0.113.3')).toBe(401);
    } finally {
      await a.close();
    }
  });

  it('not trusted (the default): X-Forwarded-For is ignored, the connection address counts', async () => {
    const a = await ApiApp.start({ api: { rateLimits: AUTH_2 } });
    try {
      expect(await guesses(a, '203.0.113.1', 2)).toEqual([401, 401]);
      expect(await guesses(a, '203.0.113.2', 1)).toEqual([429]);
      expect(await handshake(a, '203.0.113.3')).toBe(429);
    } finally {
      await a.close();
    }
  });
});
