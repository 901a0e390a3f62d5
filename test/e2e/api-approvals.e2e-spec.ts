import { ToolRegistry } from '../../src/agent';
import { WellKnownMetadataKeys as K, type Message } from '../../src';
import { ApiApp, nextSocketEvent, recordSocket } from '../support/api-app';

/**
 * Human approval before a tool runs (issue 20) over the wire of the whole server: the REST
 * routes `GET/POST /agent/sessions/:sessionId/approvals[/:callId]` (supertest) and the Socket.IO
 * `approval` event and `approve` client event (a real socket.io-client), against a real local
 * OpenAI-compatible server that scripts the model's tool call.
 */
describe('approvals over REST and Socket.IO (README: Human approval before a tool runs)', () => {
  let a: ApiApp;
  let ran: unknown[];
  let dispose: () => void;
  beforeAll(async () => {
    a = await ApiApp.start();
    ran = [];
    dispose = a.app.get(ToolRegistry).register({
      name: 'deploy',
      description: 'Deploys a service',
      parameters: { type: 'object', properties: { service: { type: 'string' } } },
      needsApproval: true,
      handler: (args) => {
        ran.push(args);
        return 'deployed';
      },
    });
  });
  afterAll(async () => {
    dispose?.();
    await a?.close();
  });
  beforeEach(() => (ran = []));

  /** The model calls `deploy`, then answers `text`; resolves once the call waits. */
  async function waitingCall(sessionId: string, text = 'done') {
    a.server.enqueue({ toolCalls: [{ name: 'deploy', arguments: { service: 'api' } }] }, { text });
    const requested = a.nextEvent(
      'agent:approval',
      (e) => e.sessionId === sessionId && e.phase === 'requested',
    );
    const settled = a.postAndWait({ sessionId, content: 'deploy it' });
    return { request: await requested, settled };
  }

  const stored = async (sessionId: string): Promise<Message[]> =>
    (await a.http().get(`/agent/sessions/${sessionId}/history`).set(a.auth).expect(200)).body
      .messages;

  describe('REST', () => {
    it('GET lists the waiting call; POST approves it (by the caller) and it runs', async () => {
      const { request, settled } = await waitingCall('rest-1', 'deployed it');

      const list = await a.http().get('/agent/sessions/rest-1/approvals').set(a.auth).expect(200);
      expect(list.body).toEqual({
        approvals: [
          {
            callId: request.callId,
            turnId: request.turnId,
            name: 'deploy',
            args: { service: 'api' },
            requestedAt: expect.any(String),
          },
        ],
      });
      await a
        .http()
        .post(`/agent/sessions/rest-1/approvals/${request.callId}`)
        .set(a.auth)
        .send({ approved: true })
        .expect(200, { decided: true });

      expect((await settled).body).toMatchObject({ outcome: 'replied', reply: 'deployed it' });
      expect(ran).toEqual([{ service: 'api' }]);
      const tool = (await stored('rest-1')).find((m) => m.role === 'tool')!;
      expect(tool.metadata[K.Approval]).toEqual({
        approved: true,
        by: { platform: 'admin', userId: 'admin' },
        at: expect.any(String),
      });
      await a.http().get('/agent/sessions/rest-1/approvals').set(a.auth).expect(200, {
        approvals: [],
      });
    });

    it('POST with approved false denies it: the model is told who denied it and why', async () => {
      const { request, settled } = await waitingCall('rest-2', 'not deployed');

      await a
        .http()
        .post(`/agent/sessions/rest-2/approvals/${request.callId}`)
        .set(a.auth)
        .send({ approved: false, reason: 'freeze week' })
        .expect(200, { decided: true });

      expect((await settled).body).toMatchObject({ outcome: 'replied', reply: 'not deployed' });
      expect(ran).toEqual([]);
      const tool = (await stored('rest-2')).find((m) => m.role === 'tool')!;
      expect(tool.content).toBe(
        '{"error":"The call to \\"deploy\\" was denied by admin: freeze week"}',
      );
    });

    it('404 for a call that is not waiting; 400 naming the field for a bad body', async () => {
      const { request, settled } = await waitingCall('rest-3');
      const route = `/agent/sessions/rest-3/approvals/${request.callId}`;

      await a
        .http()
        .post('/agent/sessions/rest-3/approvals/nope')
        .set(a.auth)
        .send({ approved: true })
        .expect(404);
      const missing = await a.http().post(route).set(a.auth).send({}).expect(400);
      expect(Object.keys(missing.body.fields)).toEqual(['approved']);
      const wrong = await a
        .http()
        .post(route)
        .set(a.auth)
        .send({ approved: 'yes', extra: 1 })
        .expect(400);
      expect(Object.keys(wrong.body.fields).sort()).toEqual(['approved', 'extra']);
      await a.http().post(route).send({ approved: true }).expect(401);
      await a.http().get('/agent/sessions/rest-3/approvals').expect(401);

      await a.http().post(route).set(a.auth).send({ approved: true }).expect(200);
      await settled;
    });
  });

  describe('Socket.IO', () => {
    it('a subscriber gets approval requested with the args, approves over the socket, gets decided', async () => {
      const socket = await a.connect();
      await socket.emitWithAck('subscribe', { sessionId: 'io-1' });
      const seen = recordSocket(socket);
      const requested = nextSocketEvent(socket, 'approval', (e) => e.phase === 'requested');
      const decided = nextSocketEvent(socket, 'approval', (e) => e.phase === 'decided');
      const { request, settled } = await waitingCall('io-1', 'deployed');

      expect(await requested).toEqual({
        sessionId: 'io-1',
        turnId: request.turnId,
        callId: request.callId,
        name: 'deploy',
        args: { service: 'api' },
        phase: 'requested',
      });
      const ack = await socket.emitWithAck('approve', {
        sessionId: 'io-1',
        callId: request.callId,
        approved: true,
      });

      expect(ack).toEqual({ decided: true });
      expect(await decided).toMatchObject({ phase: 'decided', approved: true });
      expect((await settled).body).toMatchObject({ outcome: 'replied', reply: 'deployed' });
      expect(ran).toEqual([{ service: 'api' }]);
      const tool = (await stored('io-1')).find((m) => m.role === 'tool')!;
      expect(tool.metadata[K.Approval]).toMatchObject({ by: { platform: 'admin' } });
      expect(seen.filter((e) => e.event === 'approval')).toHaveLength(2);
    });

    it('approve: { decided: false } for a call not waiting; a bad payload is acked 400 naming the field', async () => {
      const socket = await a.connect();

      expect(
        await socket.emitWithAck('approve', { sessionId: 'io-2', callId: 'nope', approved: false }),
      ).toEqual({ decided: false });
      const ack: any = await (socket as any).emitWithAck('approve', {
        sessionId: 'io-2',
        approved: true,
      });
      expect(ack).toMatchObject({ statusCode: 400 });
      expect(Object.keys(ack.fields)).toEqual(['callId']);
    });
  });
});
