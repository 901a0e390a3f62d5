import { io } from 'socket.io-client';
import request from 'supertest';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg } from '../contracts/sql-test-db';
import { nextSocketEvent, TEST_TOKEN, type AgentClient } from '../support/api-app';
import { describeNginx, NginxBalancer } from '../support/nginx';
import { describeRedis } from '../support/redis-test';
import { DistributedServers } from '../support/distributed-servers';

jest.setTimeout(90_000);

/**
 * The deployment the README documents: two server processes in distributed mode behind the
 * shipped load balancer configuration (`deploy/nginx.conf`, round robin, no sticky sessions),
 * run by a real nginx. Every request may reach either instance; the session's work still runs on
 * the one holding it, and a WebSocket client sees every turn.
 */
describeRedis('deployment: two instances behind deploy/nginx.conf', () => {
  describePg('on PostgreSQL', () => {
    describeNginx('with nginx', () => {
      let model: FakeOpenAiServer;
      let lb: NginxBalancer | undefined;
      const servers = new DistributedServers();
      const clients: AgentClient[] = [];

      async function deploy(): Promise<string> {
        const procs = ['agent-1', 'agent-2'].map((id) => servers.start(id));
        const urls = await Promise.all(procs.map((proc) => proc.url()));
        lb = await NginxBalancer.start(urls);
        return lb.url;
      }

      const authed = (req: request.Test) => req.set('Authorization', `Bearer ${TEST_TOKEN}`);

      beforeEach(async () => {
        await servers.setUp();
        model = servers.model;
      });

      afterEach(async () => {
        for (const client of clients.splice(0)) client.disconnect();
        await lb?.stop();
        lb = undefined;
        await servers.tearDown();
      });

      it('S1, S2: requests of one session spread over both instances are one conversation', async () => {
        const url = await deploy();
        model.enqueue({ text: 'R1' }, { text: 'R2' }, { text: 'R3' }, { text: 'R4' });
        const upstreams = new Set<string>();
        for (const content of ['H1', 'H2', 'H3', 'H4']) {
          const response = await authed(
            request(url).post('/agent/messages?wait=true').send({ sessionId: 's', content }),
          );
          expect(response.status).toBe(200);
          expect(response.body).toMatchObject({ settled: 'turn', outcome: 'replied' });
          upstreams.add(String(response.headers['x-upstream']));
        }
        // Round robin without stickiness: both instances took requests of the session.
        expect(upstreams.size).toBe(2);
        const history = await authed(request(url).get('/agent/sessions/s/history'));
        const contents = (history.body.messages as Array<{ content: string }>).map(
          (m) => m.content,
        );
        expect(contents).toEqual(['H1', 'R1', 'H2', 'R2', 'H3', 'R3', 'H4', 'R4']);
        const health = await request(url).get('/health');
        expect(health.status).toBe(200);
      });

      it('a WebSocket client through the balancer sees the turns, whichever instance runs them', async () => {
        const url = await deploy();
        const socket: AgentClient = io(`${url}/agent`, {
          auth: { token: TEST_TOKEN },
          transports: ['websocket'],
          reconnection: false,
        });
        clients.push(socket);
        await new Promise((resolve, reject) => {
          socket.once('connect', () => resolve(undefined));
          socket.once('connect_error', reject);
        });
        await socket.emitWithAck('subscribe', { sessionId: 's' });
        model.enqueue({ text: 'R1' }, { text: 'R2' });
        for (const content of ['H1', 'H2']) {
          const end = nextSocketEvent(
            socket,
            'turn',
            (e) => e.sessionId === 's' && e.phase === 'end',
          );
          const response = await authed(
            request(url).post('/agent/messages?wait=true').send({ sessionId: 's', content }),
          );
          expect(await end).toMatchObject({ turnId: response.body.turnId, outcome: 'replied' });
        }
      });
    });
  });
});
