import { DefaultChatTransport, type UIMessage } from 'ai';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { ApiApp, nextSocketEvent, recordSocket } from '../support/api-app';
import { distributedServerEnv } from '../support/api-process';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';
import {
  drain,
  reaching,
  streamOf,
  textOf,
  turnEnd,
  turnIdsOf,
  type SocketSeen as Seen,
} from '../support/turn-streams';

jest.setTimeout(60_000);

/**
 * Distributed mode (README, "Resuming a turn's stream"): each instance delivers to its own
 * clients the events every instance relays, in one order, and keeps turns' streams in Redis; a
 * client resumes a turn on any instance, also one that started after the turn began.
 */
describeRedis("distributed mode: resuming a turn's stream on another instance", () => {
  describePg('on PostgreSQL', () => {
    let model: FakeOpenAiServer;
    let db: TempDb;
    let prefix: string;
    const apps: ApiApp[] = [];

    beforeEach(async () => {
      model = await FakeOpenAiServer.start();
      db = await tempPgSchema();
      prefix = testPrefix();
    });

    afterEach(async () => {
      model.release();
      for (const app of apps.splice(0).reverse()) await app.close();
      await model.close();
      await deletePrefix(prefix);
      await db.drop();
    });

    async function start(instanceId: string): Promise<ApiApp> {
      const env = distributedServerEnv({ modelUrl: model.url, dbUrl: db.url, prefix, instanceId });
      const app = await ApiApp.start({ server: model, env });
      apps.push(app);
      return app;
    }

    /** A client of `app` that stays subscribed to `sessionId`, recording what it receives. */
    async function stayer(app: ApiApp, sessionId: string) {
      const socket = await app.connect();
      await socket.emitWithAck('subscribe', { sessionId });
      return { socket, seen: recordSocket(socket) as Seen };
    }

    /** The instance (of `apps`) on which the next turn of `sessionId` starts, and the turn. */
    const nextTurnOn = (sessionId: string) =>
      Promise.race(
        apps.map((app) =>
          app
            .nextEvent('agent:turn:start', (e) => e.sessionId === sessionId)
            .then((event) => ({ holder: app, turnId: event.turnId })),
        ),
      );

    it('a client that resumes on the instance not running the turn gets each event once, in order, while the model streams every 2 ms', async () => {
      const sessionId = 'dist-race';
      const [a, b] = [await start('inst-a'), await start('inst-b')];
      const stays = [await stayer(a, sessionId), await stayer(b, sessionId)];
      model.enqueue({ fault: 'trickle', pingEveryMs: 2 });
      const started = nextTurnOn(sessionId);
      await stays[0].socket.emitWithAck('message', { sessionId, content: 'go' });
      const { holder, turnId } = await started;
      const [onHolder, elsewhere] = holder === a ? stays : [stays[1], stays[0]];
      await reaching(onHolder.socket, 6);

      const resumer = await (holder === a ? b : a).connect();
      const resumerSeen = recordSocket(resumer) as Seen;
      const ack: any = await resumer.emitWithAck('subscribe', {
        sessionId,
        resume: { turnId, afterSeq: 2 },
      });
      expect(ack).toMatchObject({ ok: true, resumed: true });
      expect(ack.replayed).toBeGreaterThanOrEqual(1);
      await reaching(resumer, 2 + ack.replayed + 10);
      const ends = Promise.all([...stays.map((s) => turnEnd(s.socket)), turnEnd(resumer)]);
      await onHolder.socket.emitWithAck('abort', { sessionId });
      await ends;

      const all = streamOf(onHolder.seen, turnId);
      expect(all.map((e) => e.payload.seq)).toEqual(all.map((_, i) => i + 1));
      // The client of the other instance got every event once (not also through Socket.IO's adapter).
      expect(streamOf(elsewhere.seen, turnId)).toEqual(all);
      const got = streamOf(resumerSeen, turnId);
      expect(got).toEqual(all.filter((e) => e.payload.seq > 2));
      expect(got.at(-1)?.payload).toMatchObject({ phase: 'end', outcome: 'aborted' });
    });

    it('an instance started after the turn began resumes it from the turn log in Redis, which is kept 60 s after the end', async () => {
      const sessionId = 'dist-late';
      const a = await start('inst-a');
      const stay = await stayer(a, sessionId);
      model.enqueue({ text: 'one two three four', chunks: 4, hold: true });
      const started = a.nextEvent('agent:turn:start', (e) => e.sessionId === sessionId);
      const firstChunk = nextSocketEvent(stay.socket, 'stream', (e) => e.delta !== undefined);
      await stay.socket.emitWithAck('message', { sessionId, content: 'go' });
      const { turnId } = await started;
      await firstChunk;

      const b = await start('inst-b');
      const resumer = await b.connect();
      const resumerSeen = recordSocket(resumer) as Seen;
      const missed = streamOf(stay.seen, turnId).filter((e) => e.payload.seq > 1);
      const ack = await resumer.emitWithAck('subscribe', {
        sessionId,
        resume: { turnId, afterSeq: 1 },
      });
      expect(ack).toEqual({ ok: true, resumed: true, replayed: missed.length });
      const ends = Promise.all([turnEnd(stay.socket), turnEnd(resumer)]);
      model.release();
      await ends;

      const all = streamOf(stay.seen, turnId);
      expect(streamOf(resumerSeen, turnId)).toEqual(all.filter((e) => e.payload.seq > 1));
      const redis = testRedis();
      try {
        const ttl = await redis.pttl(`${prefix}:turnlog:${turnId}`);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(60_000);
      } finally {
        redis.disconnect();
      }
    });

    it("the AI SDK's transport on an instance not running the session: a joined input streams the rest of the turn; reconnectToStream works on any instance", async () => {
      const sessionId = 'dist-ui';
      const [a, b] = [await start('inst-a'), await start('inst-b')];
      model.enqueue(
        { toolCalls: [{ name: 'missing_tool', arguments: {} }], hold: true },
        { text: 'both answered' },
      );
      const started = nextTurnOn(sessionId);
      const first = a.postAndWait({ sessionId, content: 'one' });
      const { holder, turnId } = await started;
      await model.nextRequest();
      const other = holder === a ? b : a;
      const transport = (app: ApiApp) =>
        new DefaultChatTransport<UIMessage>({ api: `${app.url}/agent/ui/chat`, headers: app.auth });
      const pending = holder.nextEvent(
        'agent:queue',
        (e) => e.sessionId === sessionId && e.waiting.length > 0,
      );
      const joined = await transport(other).sendMessages({
        trigger: 'submit-message',
        chatId: sessionId,
        messageId: undefined,
        messages: [{ id: 'u2', role: 'user', parts: [{ type: 'text', text: 'two' }] }],
        abortSignal: undefined,
      });
      await pending;
      model.release();
      const chunks = await drain(joined);
      expect((await first).body).toMatchObject({ settled: 'turn', turnId, outcome: 'replied' });
      expect(turnIdsOf(chunks)).toEqual([turnId]);
      expect(textOf(chunks)).toBe('both answered');
      expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });

      // Within 60 s the chat's latest turn is resumable on every instance, also a new one.
      const c = await start('inst-c');
      for (const app of [holder, other, c]) {
        const resumed = await transport(app).reconnectToStream({ chatId: sessionId });
        const again = await drain(resumed!);
        expect(turnIdsOf(again)).toEqual([turnId]);
        expect(textOf(again)).toBe('both answered');
        // Its latest usage report too (from the turn log in Redis on the new instance).
        expect(again.filter((c) => c.type === 'data-usage')).toHaveLength(1);
      }
    });

    it('S7: a deleted session is not resumable on any instance, and its turn logs leave Redis', async () => {
      const sessionId = 'dist-deleted';
      const [a, b] = [await start('inst-a'), await start('inst-b')];
      model.enqueue({ text: 'gone soon' });
      const reply = await a.postAndWait({ sessionId, content: 'x' });
      const { turnId } = reply.body;
      const redis = testRedis();
      try {
        expect(await redis.exists(`${prefix}:turnlog:${turnId}`)).toBe(1);
        await b.http().delete(`/agent/sessions/${sessionId}`).set(b.auth).expect(204);
        for (const app of [a, b]) {
          const socket = await app.connect();
          const ack = await socket.emitWithAck('subscribe', {
            sessionId,
            resume: { turnId, afterSeq: 0 },
          });
          expect(ack).toEqual({ ok: true, resumed: false, reason: 'unknown' });
        }
        expect(await redis.exists(`${prefix}:turnlog:${turnId}`)).toBe(0);
        expect(await redis.exists(`${prefix}:turnlatest:${sessionId}`)).toBe(0);
      } finally {
        redis.disconnect();
      }
    });
  });
});
