import {
  Body,
  Controller,
  Get,
  Injectable,
  Module,
  Post,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import { EventEmitter2, EventEmitterModule } from '@nestjs/event-emitter';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { Registry } from 'prom-client';
import { io, type Socket } from 'socket.io-client';
import request from 'supertest';
import { AgentModule, AgentService, OpenAiCompatibleProvider } from '../../src';
import {
  AgentApiModule,
  AgentHealthIndicator,
  type AgentApiModuleExtras,
  type AgentApiModuleOptions,
} from '../../src/api';
import { FakeOpenAiServer } from '../../src/testing';

/**
 * `AgentApiModule` embedded in a host application as the README's "Embedding the API" shows: the
 * host's own Nest defaults (body parser, no global pipe, guard or filter, Nest's own Socket.IO
 * adapter), a global prefix, `AgentModule` imported without `isGlobal`. The module must serve
 * its routes, gateway and dashboard there and change nothing else of the host.
 */

const TOKEN = 'embedded-admin-token-0123456789';
const auth = { Authorization: `Bearer ${TOKEN}` };

/** The host's own routes: a ping, a form post, a JSON post without any DTO. */
@Controller('chat')
class HostController {
  @Get('ping')
  ping() {
    return { pong: true };
  }

  @Post('form')
  form(@Body() body: Record<string, string>) {
    return { received: body };
  }
}

/** The host's own health check, with the agent's indicator. */
@Controller('status')
class HostHealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly agent: AgentHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.agent.isHealthy('agent')]);
  }
}

/** A host's own authentication: `x-user` header (or the socket's `auth.user`) names the user. */
@Injectable()
class HeaderUserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{
      headers: Record<string, string | undefined>;
      auth?: { user?: string };
      user?: unknown;
    }>();
    const user = req.headers['x-user'] ?? req.auth?.user;
    if (!user) throw new UnauthorizedException('x-user required');
    req.user = { id: user };
    return true;
  }
}

interface Host {
  app: INestApplication;
  url: string;
  registry: Registry;
  close(): Promise<void>;
}

async function startHost(
  model: FakeOpenAiServer,
  extras: AgentApiModuleExtras = {},
  options: AgentApiModuleOptions = { adminToken: TOKEN },
): Promise<Host> {
  const registry = new Registry();
  @Module({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      TerminusModule,
      AgentModule.forRoot({
        llmProvider: new OpenAiCompatibleProvider({ baseURL: model.url, defaultModel: 'm' }),
      }),
      AgentApiModule.forRoot({ ...options, metricsRegistry: registry, ...extras }),
    ],
    controllers: [HostController, HostHealthController],
  })
  class HostModule {}

  const moduleRef = await Test.createTestingModule({ imports: [HostModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  app.setGlobalPrefix('api');
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, url, registry, close: () => app.close() };
}

function connect(url: string, namespace: string, options: object): Promise<Socket> {
  const socket = io(`${url}${namespace}`, {
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    ...options,
  });
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(socket));
    socket.once('connect_error', (error) => {
      socket.close();
      reject(error);
    });
  });
}

function nextEvent<T>(socket: Socket, event: string, match: (payload: T) => boolean): Promise<T> {
  return new Promise((resolve) => {
    const listener = (payload: T) => {
      if (!match(payload)) return;
      socket.off(event, listener);
      resolve(payload);
    };
    socket.on(event, listener);
  });
}

describe('AgentApiModule embedded in a host app (prefix /api, path agent)', () => {
  let model: FakeOpenAiServer;
  let host: Host;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    model = await FakeOpenAiServer.start();
    host = await startHost(model);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await host?.close();
    await model?.close();
  });

  it("the host's own routes stay unguarded, and its form and JSON bodies still work", async () => {
    await request(host.url).get('/api/chat/ping').expect(200, { pong: true });
    await request(host.url)
      .post('/api/chat/form')
      .type('form')
      .send('a=1&b=two')
      .expect(201, { received: { a: '1', b: 'two' } });
    // No global validation pipe: fields nobody declared are the host's business.
    await request(host.url)
      .post('/api/chat/form')
      .send({ anything: { nested: true } })
      .expect(201, { received: { anything: { nested: true } } });
    // Nest's own 404 for the host's unknown routes, not the module's error shape.
    const missing = await request(host.url).get('/api/nope').expect(404);
    expect(missing.body).toEqual({
      statusCode: 404,
      message: 'Cannot GET /api/nope',
      error: 'Not Found',
    });
  });

  it("the module's routes need the token, refuse non-JSON bodies, and validate", async () => {
    const unauthorized = await request(host.url).get('/api/agent/sessions/s/queue').expect(401);
    expect(unauthorized.body.message).toMatch(/token/);
    await request(host.url).get('/api/agent/sessions/s/queue').set(auth).expect(200, {
      sessionId: 's',
      waiting: [],
    });
    await request(host.url)
      .post('/api/agent/messages')
      .set(auth)
      .type('form')
      .send('sessionId=s&content=hi')
      .expect(415);
    const invalid = await request(host.url)
      .post('/api/agent/messages')
      .set(auth)
      .send({ sessionId: 's', content: 'hi', extra: 1 })
      .expect(400);
    expect(JSON.stringify(invalid.body)).toContain('extra');
    // The routes sit under the host's prefix only.
    await request(host.url).get('/agent/sessions/s/queue').set(auth).expect(404);
  });

  it('a turn over the embedded REST route and the embedded Socket.IO namespace', async () => {
    const socket = await connect(host.url, '/agent', { auth: { token: TOKEN } });
    sockets.push(socket);
    const ack = await socket.timeout(5000).emitWithAck('subscribe', { sessionId: 'embed-1' });
    expect(ack).toEqual({ ok: true });
    const ended = nextEvent<{ phase: string; outcome?: string }>(
      socket,
      'turn',
      (e) => e.phase === 'end',
    );
    const streamed = nextEvent<{ delta?: string }>(socket, 'stream', (e) => !!e.delta);
    model.enqueue({ text: 'hello from the host', chunks: 3 });

    const answer = await request(host.url)
      .post('/api/agent/messages?wait=true')
      .set(auth)
      .send({ sessionId: 'embed-1', content: 'hi', userId: 'u1', platform: 'web' })
      .expect(200);

    expect(answer.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
    expect(await ended).toMatchObject({ outcome: 'replied' });
    expect((await streamed).delta).toBeTruthy();
    // The metrics are on the registry the host passed.
    const turns = await host.registry.getSingleMetricAsString('agent_turns_total');
    expect(turns).toMatch(/agent_turns_total\{outcome="replied"\} 1/);
  });

  it('history pages and stop all, through the embedded routes', async () => {
    model.enqueue({ text: 'one' }, { text: 'two' });
    for (const content of ['first', 'second']) {
      await request(host.url)
        .post('/api/agent/messages?wait=true')
        .set(auth)
        .send({ sessionId: 'embed-2', content })
        .expect(200);
    }
    const page = await request(host.url)
      .get('/api/agent/sessions/embed-2/history?limit=2')
      .set(auth)
      .expect(200);
    expect(page.body.messages.map((m: { content: string }) => m.content)).toEqual([
      'second',
      'two',
    ]);
    expect(page.body.nextBefore).toBe(page.body.messages[0].id);

    model.enqueue({ text: 'held', hold: true });
    const started = new Promise<void>((resolve) => {
      host.app.get(EventEmitter2).once('agent:turn:start', () => resolve());
    });
    await request(host.url)
      .post('/api/agent/messages')
      .set(auth)
      .send({ sessionId: 'embed-3', content: 'wait for me' })
      .expect(202);
    await started;
    const stopped = await request(host.url)
      .post('/api/agent/sessions/abort')
      .set(auth)
      .send({})
      .expect(200);
    expect(stopped.body).toEqual({ stopped: ['embed-3'] });
  });

  it('lists the sessions through the embedded route, most recent activity first', async () => {
    const listed = await request(host.url).get('/api/agent/sessions?limit=2').set(auth).expect(200);
    expect(listed.body.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([
      'embed-3',
      'embed-2',
    ]);
    const rest = await request(host.url)
      .get(`/api/agent/sessions?limit=50&cursor=${encodeURIComponent(listed.body.nextCursor)}`)
      .set(auth)
      .expect(200);
    expect(rest.body.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual(['embed-1']);
    expect(rest.body.nextCursor).toBeUndefined();
  });

  it("AgentHealthIndicator in the host's own terminus check", async () => {
    const health = await request(host.url).get('/api/status').expect(200);
    expect(health.body.status).toBe('ok');
    expect(health.body.info.agent).toMatchObject({
      status: 'up',
      store: { status: 'up' },
      queue: { status: 'up', mode: 'in-process' },
      model: { status: 'up' },
    });
  });

  it('the dashboard is served at the path, told where the routes and namespace are', async () => {
    const page = await request(host.url).get('/api/agent').expect(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.text).toContain('<meta name="agent-api-base" content="/api/agent" />');
    expect(page.text).toContain('<meta name="agent-namespace" content="/agent" />');
    expect(page.text).toContain('src="/api/agent/dashboard/dashboard.js"');
    const script = await request(host.url).get('/api/agent/dashboard/dashboard.js').expect(200);
    expect(script.headers['content-type']).toMatch(/javascript/);
  });

  it('the AgentService of the host is the one the routes drive', () => {
    expect(host.app.get(AgentService).isQueueFull('embed-1')).toBe(false);
  });
});

describe('AgentApiModule with a host guard, its own path, namespace and no dashboard', () => {
  let model: FakeOpenAiServer;
  let host: Host;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    model = await FakeOpenAiServer.start();
    host = await startHost(
      model,
      { path: 'ops/agent', namespace: '/ops', dashboard: false, authGuard: HeaderUserGuard },
      {},
    );
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await host?.close();
    await model?.close();
  });

  it("REST: the host's guard admits its users, the caller is the guard's user", async () => {
    await request(host.url).get('/api/ops/agent/sessions/g/queue').expect(401);
    // The admin token means nothing here: the host guard decides.
    await request(host.url).get('/api/ops/agent/sessions/g/queue').set(auth).expect(401);
    await request(host.url)
      .get('/api/ops/agent/sessions/g/queue')
      .set('x-user', 'alice')
      .expect(200, { sessionId: 'g', waiting: [] });

    model.enqueue({ text: 'held', hold: true });
    const ended = new Promise<{ outcome: string }>((resolve) => {
      host.app.get(EventEmitter2).once('agent:turn:end', resolve);
    });
    const started = new Promise<void>((resolve) => {
      host.app.get(EventEmitter2).once('agent:turn:start', () => resolve());
    });
    await request(host.url)
      .post('/api/ops/agent/messages')
      .set('x-user', 'alice')
      .send({ sessionId: 'g', content: 'stop me' })
      .expect(202);
    await started;
    await request(host.url)
      .post('/api/ops/agent/sessions/g/abort')
      .set('x-user', 'alice')
      .send({})
      .expect(200, { stopped: true });
    expect(await ended).toMatchObject({ outcome: 'aborted' });
    const history = await request(host.url)
      .get('/api/ops/agent/sessions/g/history')
      .set('x-user', 'alice')
      .expect(200);
    const stop = history.body.messages.find(
      (m: { metadata?: { stoppedBy?: unknown } }) => m.metadata?.stoppedBy,
    );
    expect(stop.metadata.stoppedBy).toEqual({ platform: 'host', userId: 'alice' });
  });

  it("Socket.IO: the handshake goes through the host's guard, on the module's namespace", async () => {
    await expect(connect(host.url, '/ops', { auth: { token: TOKEN } })).rejects.toThrow(
      /Unauthorized/,
    );
    const socket = await connect(host.url, '/ops', { auth: { user: 'bob' } });
    sockets.push(socket);
    expect(await socket.timeout(5000).emitWithAck('subscribe', { all: true })).toEqual({
      ok: true,
    });
    // The default namespace of the module is not served.
    await expect(connect(host.url, '/agent', { auth: { user: 'bob' } })).rejects.toThrow(
      /Invalid namespace/,
    );
  });

  it('no dashboard when dashboard is false', async () => {
    await request(host.url).get('/api/ops/agent').expect(404);
  });
});

describe('AgentApiModule without AgentModule', () => {
  it('start-up fails with one error saying to import AgentModule', async () => {
    @Module({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentApiModule.forRootAsync({
          path: 'agent',
          useFactory: () => ({ adminToken: TOKEN }),
        }),
      ],
    })
    class LonelyModule {}

    const moduleRef = await Test.createTestingModule({ imports: [LonelyModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await expect(app.init()).rejects.toThrow(
        /AgentApiModule found no AgentInstrumentation: import AgentModule\.forRoot/,
      );
    } finally {
      await app.close().catch(() => undefined);
    }
  });
});
