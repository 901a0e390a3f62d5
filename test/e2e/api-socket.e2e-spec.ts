import { ToolRegistry } from '../../src/agent';
import {
  ApiApp,
  TEST_TOKEN,
  nextSocketEvent,
  recordSocket,
  type AgentClient,
} from '../support/api-app';

/** Resolves with the error of a refused handshake. */
function refusal(socket: AgentClient): Promise<Error> {
  return new Promise((resolve, reject) => {
    socket.once('connect_error', resolve);
    socket.once('connect', () => reject(new Error('the handshake was accepted')));
  });
}

describe('Socket.IO namespace /agent (README: Socket.IO)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  describe('handshake auth', () => {
    it.each([
      ['no auth', null],
      ['no token', {}],
      ['a wrong token', { token: `${TEST_TOKEN}x` }],
      ['a token that is not a string', { token: 12345 }],
    ])('%s: connect_error, never connected', async (_, auth) => {
      const socket = a.socket(auth);

      const error = await refusal(socket);

      expect(error.message).toMatch(/Unauthorized/);
      expect(socket.connected).toBe(false);
    });

    it('the admin token in auth.token: connected', async () => {
      const socket = await a.connect();

      expect(socket.connected).toBe(true);
    });
  });

  describe('subscribe', () => {
    it('{ sessionId } and { all: true } are acked { ok: true }', async () => {
      const socket = await a.connect();

      expect(await socket.emitWithAck('subscribe', { sessionId: 'sub-1' })).toEqual({ ok: true });
      expect(await socket.emitWithAck('subscribe', { all: true })).toEqual({ ok: true });
    });

    it.each([
      ['nothing', {}, 'sessionId'],
      ['a blank session id', { sessionId: ' ' }, 'sessionId'],
      ['all: false', { all: false }, 'all'],
      ['an unknown field', { sessionId: 's', room: 'x' }, 'room'],
      ['a string', 'sub-1', 'sessionId'],
    ])('%s: acked with a 400 naming the field', async (_, payload, field) => {
      const socket = await a.connect();

      const ack: any = await (socket as any).emitWithAck('subscribe', payload);

      expect(ack).toMatchObject({ statusCode: 400, error: 'Bad Request' });
      expect(Object.keys(ack.fields)).toContain(field);
    });
  });

  describe('rooms', () => {
    it('a client receives only the sessions it subscribed to; { all: true } receives all', async () => {
      const [one, two, all, none] = await Promise.all([
        a.connect(),
        a.connect(),
        a.connect(),
        a.connect(),
      ]);
      await one.emitWithAck('subscribe', { sessionId: 'room-1' });
      await two.emitWithAck('subscribe', { sessionId: 'room-2' });
      await all.emitWithAck('subscribe', { all: true });
      const seen = {
        one: recordSocket(one),
        two: recordSocket(two),
        all: recordSocket(all),
        none: recordSocket(none),
      };
      const ended = (socket: AgentClient, sessionId: string) =>
        nextSocketEvent(socket, 'turn', (e) => e.sessionId === sessionId && e.phase === 'end');

      // One session after the other: a stray event would arrive before the next turn's end.
      const twoEnded = Promise.all([ended(two, 'room-2'), ended(all, 'room-2')]);
      await one.emitWithAck('message', { sessionId: 'room-2', content: 'for two' });
      await twoEnded;
      const oneEnded = Promise.all([ended(one, 'room-1'), ended(all, 'room-1')]);
      await two.emitWithAck('message', { sessionId: 'room-1', content: 'for one' });
      await oneEnded;
      // `none` shares the connection order guarantee: ping it after both turns.
      await none.emitWithAck('subscribe', { sessionId: 'room-none' });

      const sessions = (events: { payload: any }[]) => [
        ...new Set(events.map((e) => e.payload.sessionId)),
      ];
      expect(sessions(seen.one)).toEqual(['room-1']);
      expect(sessions(seen.two)).toEqual(['room-2']);
      expect(sessions(seen.all).sort()).toEqual(['room-1', 'room-2']);
      expect(seen.none).toEqual([]);
      expect(seen.one.map((e) => e.event)).toEqual(
        expect.arrayContaining(['turn', 'stream', 'message', 'usage']),
      );
    });
  });

  describe('events of one turn', () => {
    it('turn start, stream chunks, message, usage, turn end, all with the turn id', async () => {
      const socket = await a.connect();
      await socket.emitWithAck('subscribe', { sessionId: 'stream-1' });
      const seen = recordSocket(socket);
      const end = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');
      const done = nextSocketEvent(socket, 'stream', (e) => e.done === true);
      a.server.enqueue({ text: 'Hello from the model', chunks: 3 });

      expect(await socket.emitWithAck('message', { sessionId: 'stream-1', content: 'hi' })).toEqual(
        { accepted: true },
      );
      const [turnEnd] = await Promise.all([end, done]);

      const { turnId } = turnEnd;
      expect(turnEnd).toEqual({
        sessionId: 'stream-1',
        turnId,
        phase: 'end',
        outcome: 'replied',
        seq: expect.any(Number),
      });
      expect(seen[0]).toEqual({
        event: 'turn',
        payload: { sessionId: 'stream-1', turnId, phase: 'start', seq: 1 },
      });
      // The turn's stream (turn, stream, tool events) is numbered 1, 2, 3, ... without gaps.
      const numbered = seen.filter((e) => ['turn', 'stream', 'tool'].includes(e.event));
      expect(numbered.map((e) => e.payload.seq)).toEqual(numbered.map((_, i) => i + 1));
      const deltas = seen
        .filter((e) => e.event === 'stream' && e.payload.delta)
        .map((e) => e.payload);
      expect(deltas.map((d) => d.delta).join('')).toBe('Hello from the model');
      expect(deltas.every((d) => d.turnId === turnId)).toBe(true);
      expect(seen.filter((e) => e.event === 'stream' && e.payload.done)).toEqual([
        {
          event: 'stream',
          payload: { sessionId: 'stream-1', turnId, seq: turnEnd.seq! - 1, done: true },
        },
      ]);
      expect(seen.find((e) => e.event === 'message')?.payload).toMatchObject({
        sessionId: 'stream-1',
        turnId,
        content: 'Hello from the model',
        source: 'agent',
      });
      expect(seen.find((e) => e.event === 'usage')?.payload).toMatchObject({
        sessionId: 'stream-1',
        turnId,
        used: expect.any(Number),
        parts: expect.any(Array),
      });
      const order = seen.map((e) => e.event);
      expect(order.indexOf('turn')).toBe(0);
      expect(order.lastIndexOf('turn')).toBeGreaterThan(order.indexOf('message'));
    });

    it('tool: start and end with callId and ok, without arguments or results', async () => {
      const dispose = a.app.get(ToolRegistry).register({
        name: 'lookup',
        description: 'Looks something up',
        parameters: { type: 'object', properties: { q: { type: 'string' } } },
        handler: () => 'secret result',
      });
      try {
        const socket = await a.connect();
        await socket.emitWithAck('subscribe', { sessionId: 'tool-1' });
        const seen = recordSocket(socket);
        const end = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');
        a.server.enqueue(
          { toolCalls: [{ name: 'lookup', arguments: { q: 'secret args' } }] },
          { text: 'done' },
        );

        await socket.emitWithAck('message', { sessionId: 'tool-1', content: 'look it up' });
        const { turnId } = await end;

        const tools = seen.filter((e) => e.event === 'tool').map((e) => e.payload);
        expect(tools).toEqual([
          {
            sessionId: 'tool-1',
            turnId,
            callId: expect.any(String),
            name: 'lookup',
            phase: 'start',
            seq: 2,
          },
          {
            sessionId: 'tool-1',
            turnId,
            callId: tools[0].callId,
            name: 'lookup',
            phase: 'end',
            ok: true,
            seq: 3,
          },
        ]);
        expect(JSON.stringify(tools)).not.toMatch(/secret/);
      } finally {
        dispose();
      }
    });

    it('queue: { sessionId, waiting } when an input starts waiting', async () => {
      const socket = await a.connect();
      await socket.emitWithAck('subscribe', { sessionId: 'queue-1' });
      a.server.enqueue({ text: 'held answer', chunks: 2, hold: true });
      const waiting = nextSocketEvent(socket, 'queue', (e) => e.waiting.length === 1);
      const end = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');

      const called = a.nextModelCall();
      await socket.emitWithAck('message', { sessionId: 'queue-1', content: 'first' });
      await called;
      await socket.emitWithAck('message', {
        sessionId: 'queue-1',
        content: 'second',
        source: 'scheduler',
      });

      expect(await waiting).toEqual({
        sessionId: 'queue-1',
        waiting: [expect.objectContaining({ content: 'second', source: 'scheduler' })],
      });
      a.server.release();
      await end;
    });
  });

  describe('message and abort from clients', () => {
    it('message: acked { accepted: true } before the turn ends', async () => {
      const socket = await a.connect();
      await socket.emitWithAck('subscribe', { sessionId: 'msg-1' });
      a.server.enqueue({ text: 'held answer', chunks: 2, hold: true });
      const end = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');

      const called = a.nextModelCall();
      const ack = await socket.emitWithAck('message', { sessionId: 'msg-1', content: 'hi' });
      await called;
      a.server.release();

      expect(ack).toEqual({ accepted: true });
      expect(await end).toMatchObject({ outcome: 'replied' });
    });

    it.each([
      ['no content', { sessionId: 'm' }, 'content'],
      ['an unknown field', { sessionId: 'm', content: 'c', extra: 1 }, 'extra'],
      [
        'a file:// attachment',
        { sessionId: 'm', content: 'c', attachments: [{ kind: 'file', data: 'file:///x' }] },
        'attachments.0.data',
      ],
    ])('message with %s: acked with a 400 naming the field', async (_, payload, field) => {
      const socket = await a.connect();

      const ack: any = await (socket as any).emitWithAck('message', payload);

      expect(ack).toMatchObject({ statusCode: 400 });
      expect(Object.keys(ack.fields)).toContain(field);
    });

    it('a payload nested 10000 levels deep (sent raw): acked with a 400, never a stack overflow', async () => {
      const socket = await a.connect();
      const engine = (socket.io as any).engine;
      const ack = new Promise<string>((resolve) =>
        engine.on('packet', (packet: { data?: unknown }) => {
          if (String(packet.data).startsWith('3/agent,77[')) resolve(String(packet.data));
        }),
      );
      const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;

      // Socket.IO's own client cannot even encode it: write the EVENT packet by hand.
      engine.write(`2/agent,77["message",{"sessionId":"d","content":"c","x":${deep}}]`);

      const [body] = JSON.parse((await ack).slice('3/agent,77'.length));
      expect(body).toMatchObject({
        statusCode: 400,
        fields: { body: [expect.stringMatching(/deeper/)] },
      });
      expect(socket.connected).toBe(true);
    });

    it('abort: acked { stopped }, the turn ends aborted, by is the socket caller (admin)', async () => {
      const socket = await a.connect();
      await socket.emitWithAck('subscribe', { sessionId: 'abort-s' });
      a.server.enqueue({ text: 'held answer', chunks: 2, hold: true });
      const start = nextSocketEvent(socket, 'turn', (e) => e.phase === 'start');
      const end = nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');
      const called = a.nextModelCall();
      await socket.emitWithAck('message', { sessionId: 'abort-s', content: 'go' });
      const { turnId } = await start;
      await called;

      const ack = await socket.emitWithAck('abort', {
        sessionId: 'abort-s',
        turnId,
        reason: 'stop',
      });
      const again = await socket.emitWithAck('abort', { sessionId: 'abort-s', turnId: 'other' });

      expect(ack).toEqual({ stopped: true });
      expect(again).toEqual({ stopped: false });
      expect(await end).toEqual({
        sessionId: 'abort-s',
        turnId,
        phase: 'end',
        outcome: 'aborted',
        seq: expect.any(Number),
      });
      const history = await a.http().get('/agent/sessions/abort-s/history').set(a.auth);
      expect(history.body.messages.at(-1).metadata.turnRecord.by).toEqual({
        platform: 'admin',
        userId: 'admin',
      });
    });

    it.each([
      ['no sessionId', { turnId: 't' }, 'sessionId'],
      ['queued not a boolean', { sessionId: 's', queued: 1 }, 'queued'],
      ['a by field', { sessionId: 's', by: { platform: 'x', userId: 'y' } }, 'by'],
    ])('abort with %s: acked with a 400 naming the field', async (_, payload, field) => {
      const socket = await a.connect();

      const ack: any = await (socket as any).emitWithAck('abort', payload);

      expect(ack).toMatchObject({ statusCode: 400 });
      expect(Object.keys(ack.fields)).toContain(field);
    });
  });

  describe('slow clients do not slow turns', () => {
    it('a subscriber that stopped reading does not hold up a turn or another client', async () => {
      const slow = await a.connect();
      await slow.emitWithAck('subscribe', { all: true });
      // The slow client stops reading: what the server writes to it piles up unread.
      const tcp = (slow.io as any).engine.transport.ws._socket;
      tcp.pause();
      const fast = await a.connect();
      await fast.emitWithAck('subscribe', { sessionId: 'slow-1' });
      const end = nextSocketEvent(fast, 'turn', (e) => e.phase === 'end');
      const text = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(4000);
      a.server.enqueue({ text, chunks: 400 });

      try {
        await fast.emitWithAck('message', { sessionId: 'slow-1', content: 'go' });

        expect(await end).toMatchObject({ outcome: 'replied' });
      } finally {
        tcp.resume();
      }
    });
  });
});
