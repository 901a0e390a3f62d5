import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { AgentIoAdapter } from 'nest-agent-orchestrator/api';
import { FakeOpenAiServer } from 'nest-agent-orchestrator/testing';
import { io, type Socket } from 'socket.io-client';
import request from 'supertest';
import { HttpModule } from '../src/http.module';

/**
 * The host's own end-to-end test, against the installed package: the agent's routes and
 * Socket.IO namespace embedded under /api/agent beside the host's own routes, the model a
 * scripted fake (`nest-agent-orchestrator/testing`).
 */
const TOKEN = 'host-app-admin-token-0123456789';
const auth = { Authorization: `Bearer ${TOKEN}` };

let model: FakeOpenAiServer;
let app: INestApplication;
let url: string;
let socket: Socket | undefined;

beforeAll(async () => {
  model = await FakeOpenAiServer.start();
  process.env.LLM_BASE_URL = model.url;
  process.env.LLM_MODEL = 'fake-model';
  process.env.AGENT_ADMIN_TOKEN = TOKEN;
  const moduleRef = await Test.createTestingModule({ imports: [HttpModule] }).compile();
  app = moduleRef.createNestApplication({ logger: ['error'] });
  app.setGlobalPrefix('api');
  app.useWebSocketAdapter(new AgentIoAdapter(app));
  await app.listen(0, '127.0.0.1');
  url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
});

afterAll(async () => {
  socket?.close();
  await app?.close();
  await model?.close();
});

function connect(): Promise<Socket> {
  const client = io(`${url}/agent`, {
    auth: { token: TOKEN },
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
  });
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve(client));
    client.once('connect_error', reject);
  });
}

it("keeps the host's own routes unguarded, its form posts working", async () => {
  await request(url).get('/api/chat/ping').expect(200, { pong: true });
  await request(url)
    .post('/api/chat/feedback')
    .type('form')
    .send('name=alice')
    .expect(201, { thanks: 'alice' });
});

it("guards the agent's routes with the admin token", async () => {
  await request(url).get('/api/agent/sessions/chat-9/queue').expect(401);
  await request(url).get('/api/agent/sessions/chat-9/queue').set(auth).expect(200);
});

it('drives a turn over REST while the socket streams it', async () => {
  socket = await connect();
  expect(await socket.timeout(5000).emitWithAck('subscribe', { sessionId: 'chat-1' })).toEqual({
    ok: true,
  });
  const ended = new Promise<{ outcome: string }>((resolve) => {
    socket!.on('turn', (event: { phase: string; outcome: string }) => {
      if (event.phase === 'end') resolve(event);
    });
  });
  const deltas: string[] = [];
  socket.on('stream', (event: { delta?: string }) => {
    if (event.delta) deltas.push(event.delta);
  });
  model.enqueue(
    { toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] },
    { text: 'Order 42 has shipped.', chunks: 3 },
  );

  const answer = await request(url)
    .post('/api/agent/messages?wait=true')
    .set(auth)
    .send({ sessionId: 'chat-1', userId: 'alice', content: 'Where is order 42?' })
    .expect(200);

  expect(answer.body).toMatchObject({
    settled: 'turn',
    outcome: 'replied',
    reply: 'Order 42 has shipped.',
  });
  expect(await ended).toMatchObject({ outcome: 'replied' });
  expect(deltas.join('')).toBe('Order 42 has shipped.');
});

it('pages the history, newest page first', async () => {
  const page = await request(url)
    .get('/api/agent/sessions/chat-1/history?limit=1')
    .set(auth)
    .expect(200);
  expect(page.body.messages.map((m: { role: string }) => m.role)).toEqual(['assistant']);
  expect(page.body.nextBefore).toEqual(expect.any(String));
  const older = await request(url)
    .get(`/api/agent/sessions/chat-1/history?limit=100&before=${page.body.nextBefore}`)
    .set(auth)
    .expect(200);
  expect(older.body.messages[0]).toMatchObject({ role: 'user', content: 'Where is order 42?' });
});

it('stops every running turn at once', async () => {
  model.enqueue({ text: 'a long answer', hold: true });
  const started = new Promise<void>((resolve) => {
    socket!.on('turn', (event: { phase: string; sessionId: string }) => {
      if (event.phase === 'start' && event.sessionId === 'chat-1') resolve();
    });
  });
  await request(url)
    .post('/api/agent/messages')
    .set(auth)
    .send({ sessionId: 'chat-1', userId: 'alice', content: 'Tell me everything.' })
    .expect(202);
  await started;

  const stopped = await request(url)
    .post('/api/agent/sessions/abort')
    .set(auth)
    .send({})
    .expect(200);
  expect(stopped.body).toEqual({ stopped: ['chat-1'] });
});

it('lists the sessions, most recent activity first', async () => {
  const listed = await request(url).get('/api/agent/sessions').set(auth).expect(200);
  expect(listed.body.sessions[0]).toMatchObject({ sessionId: 'chat-1', waiting: 0 });
  expect(listed.body.sessions[0].lastTurn).toMatchObject({ turnId: expect.any(String) });
});

it('serves the dashboard from the installed package, pointed at /api/agent', async () => {
  const page = await request(url).get('/api/agent').expect(200);
  expect(page.text).toContain('<meta name="agent-api-base" content="/api/agent" />');
  await request(url).get('/api/agent/dashboard/dashboard.js').expect(200);
  await request(url).get('/api/agent/dashboard/dashboard.css').expect(200);
});
