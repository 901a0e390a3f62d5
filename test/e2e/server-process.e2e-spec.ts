import { io } from 'socket.io-client';
import request from 'supertest';
import { FakeOpenAiServer } from '../../src/testing';
import { ServerProcess } from '../support/api-process';
import { TEST_TOKEN, nextSocketEvent, type AgentClient } from '../support/api-app';
import { rawConnection } from '../support/api-raw';

jest.setTimeout(60_000);

describe('the server process (src/main.ts)', () => {
  let server: FakeOpenAiServer;
  let proc: ServerProcess | undefined;
  let socket: AgentClient | undefined;

  beforeAll(async () => {
    server = await FakeOpenAiServer.start();
  });
  afterEach(async () => {
    socket?.disconnect();
    proc?.signal('SIGKILL');
    await proc?.exited;
    proc = socket = undefined;
  });
  afterAll(() => server.close());

  it('SIGTERM during a running turn: the turn ends aborted, the ?wait=true request gets its answer, sockets close, exit 0', async () => {
    proc = ServerProcess.start({
      AGENT_ADMIN_TOKEN: TEST_TOKEN,
      LLM_BASE_URL: server.url,
      LLM_MODEL: 'test-model',
    });
    const url = await proc.url();
    socket = io(`${url}/agent`, {
      auth: { token: TEST_TOKEN },
      transports: ['websocket'],
      reconnection: false,
    });
    await new Promise((resolve) => socket!.once('connect', () => resolve(undefined)));
    await socket.emitWithAck('subscribe', { sessionId: 'sigterm' });
    const turnEnd = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');
    const disconnected = new Promise((resolve) => socket!.once('disconnect', resolve));
    server.enqueue({ text: 'an answer that is held open', chunks: 3, hold: true });
    const called = server.nextRequest();
    const answer = request(url)
      .post('/agent/messages?wait=true')
      .set('Authorization', `Bearer ${TEST_TOKEN}`)
      .send({ sessionId: 'sigterm', content: 'go' })
      .then((r) => r);
    await called;

    proc.signal('SIGTERM');
    const res = await answer;
    const exit = await proc.exited;

    expect(res.status).toBe(200);
    expect(res.body).toEqual({ settled: 'turn', turnId: expect.any(String), outcome: 'aborted' });
    expect(await turnEnd).toMatchObject({ sessionId: 'sigterm', phase: 'end', outcome: 'aborted' });
    await disconnected;
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('AGENT_ADMIN_TOKEN unset: a token is generated, printed once, and works; SIGINT exits 0', async () => {
    proc = ServerProcess.start({ LLM_BASE_URL: server.url });
    const url = await proc.url();
    const [, token] = await proc.waitForOutput(/Admin token \(generated[^)]*\): (\S+)/);

    const denied = await request(url).get('/agent/sessions/x/queue');
    const allowed = await request(url)
      .get('/agent/sessions/x/queue')
      .set('Authorization', `Bearer ${token}`);
    const health = await request(url).get('/health');
    proc.signal('SIGINT');
    const exit = await proc.exited;

    expect(proc.stdout.split(token)).toHaveLength(2);
    expect([denied.status, allowed.status, health.status]).toEqual([401, 200, 200]);
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('HTTP_REQUEST_TIMEOUT_MS: an incomplete request body is answered 408 and closed after it', async () => {
    proc = ServerProcess.start({
      AGENT_ADMIN_TOKEN: TEST_TOKEN,
      LLM_BASE_URL: server.url,
      HTTP_HEADERS_TIMEOUT_MS: '500',
      HTTP_REQUEST_TIMEOUT_MS: '1000',
      HTTP_MAX_CONNECTIONS: '16',
    });
    const raw = await rawConnection(await proc.url());

    raw.socket.write(
      'POST /agent/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\n\r\n{"sessionId":',
    );
    const { data, ms } = await raw.closed;

    expect(data).toMatch(/^HTTP\/1\.1 408 /);
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(2500);
  });

  it('HTTP_ADMIN_RATE_LIMIT: admin requests past the per-minute limit get 429 with Retry-After', async () => {
    proc = ServerProcess.start({
      AGENT_ADMIN_TOKEN: TEST_TOKEN,
      LLM_BASE_URL: server.url,
      HTTP_ADMIN_RATE_LIMIT: '2',
    });
    const url = await proc.url();
    const get = () =>
      request(url).get('/agent/sessions/rl/history').set('Authorization', `Bearer ${TEST_TOKEN}`);

    const answers = [await get(), await get(), await get()];

    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429]);
    expect(Number(answers[2].headers['retry-after'])).toBeGreaterThan(0);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['HOST', 'not a host'],
    ['AGENT_ADMIN_TOKEN', 'short'],
    ['LLM_BASE_URL', 'not a url'],
    ['REDIS_URL', 'http://localhost'],
    ['REDIS_URL', 'redis://127.0.0.1:6379'],
    ['AGENT_LEASE_MS', '5'],
    ['AGENT_CONCURRENCY', '0'],
    ['AGENT_RUN_WHERE_RECEIVED', 'maybe'],
    ['AGENT_QUEUE_PREFIX', 'a b'],
    ['AGENT_INSTANCE_ID', 'has space'],
    ['HTTP_MAX_CONNECTIONS', 'lots'],
    ['HTTP_REQUEST_TIMEOUT_MS', '0'],
    ['HTTP_HEADERS_TIMEOUT_MS', '90000'],
    ['HTTP_ADMIN_RATE_LIMIT', '0'],
    ['HTTP_PUBLIC_RATE_LIMIT', 'many'],
    ['TRUST_PROXY', 'true'],
    ['TRUST_PROXY', '0.0.0.0/99'],
    ['LOG_FORMAT', 'xml'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http/xml'],
  ])(
    'bad configuration %s=%s: exits non-zero printing one line naming the variable',
    async (name, value) => {
      proc = ServerProcess.start({ [name]: value });

      const exit = await proc.exited;

      expect(exit.code).not.toBe(0);
      expect(exit.code).not.toBeNull();
      const lines = (proc.stdout + proc.stderr).split('\n').filter((line) => line.trim());
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(name);
    },
  );
});
