import { ApiApp, nextSocketEvent, recordSocket, type AgentClient } from '../support/api-app';
import { reaching, streamOf, turnEnd } from '../support/turn-streams';

/** Connects a socket that was disconnected (a client's reconnect: same object, new connection). */
function reconnect(socket: AgentClient): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
    socket.connect();
  });
}

describe('Socket.IO resume of a turn stream (README: Resuming a turn stream)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  /** A client that stays connected to `sessionId`, recording what it receives. */
  async function stayer(sessionId: string) {
    const socket = await a.connect();
    await socket.emitWithAck('subscribe', { sessionId });
    return { socket, seen: recordSocket(socket) };
  }

  it('a client that drops mid-turn and resumes gets exactly the missed events, then the live ones', async () => {
    const sessionId = 'resume-mid-turn';
    const stay = await stayer(sessionId);
    const dropper = await a.connect();
    await dropper.emitWithAck('subscribe', { sessionId });
    const dropperSeen = recordSocket(dropper);
    // First answer: a tool call (a tool that does not exist: the call still starts and ends),
    // held; second answer: text in 4 chunks, held after its first chunk.
    a.server.enqueue(
      { toolCalls: [{ name: 'missing_tool', arguments: {} }], hold: true },
      { text: 'one two three four', chunks: 4, hold: true },
    );
    const started = nextSocketEvent(dropper, 'turn', (e) => e.phase === 'start');
    const firstCall = a.nextModelCall();
    await stay.socket.emitWithAck('message', { sessionId, content: 'go' });
    const { turnId } = await started;
    await firstCall;

    dropper.disconnect();
    // Meanwhile: the tool call's start and end and the first chunk of the second answer.
    const firstChunk = nextSocketEvent(stay.socket, 'stream', (e) => e.delta !== undefined);
    const secondCall = a.nextModelCall();
    a.server.release();
    await secondCall;
    await firstChunk;
    const afterSeq = Math.max(...streamOf(dropperSeen, turnId).map((e) => e.payload.seq));
    const missed = streamOf(stay.seen, turnId).filter((e) => e.payload.seq > afterSeq);

    await reconnect(dropper);
    const ack = await dropper.emitWithAck('subscribe', {
      sessionId,
      resume: { turnId, afterSeq },
    });
    expect(ack).toEqual({ ok: true, resumed: true, replayed: missed.length });
    expect(missed.map((e) => e.event)).toEqual(['tool', 'tool', 'stream']);
    const ends = Promise.all([turnEnd(stay.socket), turnEnd(dropper)]);
    a.server.release();
    await ends;

    const all = streamOf(stay.seen, turnId);
    expect(streamOf(dropperSeen, turnId)).toEqual(all);
    expect(all.map((e) => e.payload.seq)).toEqual(all.map((_, i) => i + 1));
    expect(
      all
        .filter((e) => e.event === 'stream')
        .map((e) => e.payload.delta ?? '')
        .join(''),
    ).toBe('one two three four');
  });

  it('events that arrive while the replay is sent: no gap, no duplicate (a model streaming every 2 ms)', async () => {
    const sessionId = 'resume-race';
    const stay = await stayer(sessionId);
    a.server.enqueue({ fault: 'trickle', pingEveryMs: 2 });
    const streaming = reaching(stay.socket, 6);
    await stay.socket.emitWithAck('message', { sessionId, content: 'go' });
    await streaming;
    const { turnId } = stay.seen.find((e) => e.event === 'turn')!.payload;

    const resumer = await a.connect();
    const resumerSeen = recordSocket(resumer);
    const ack: any = await resumer.emitWithAck('subscribe', {
      sessionId,
      resume: { turnId, afterSeq: 2 },
    });
    expect(ack).toMatchObject({ ok: true, resumed: true });
    expect(ack.replayed).toBeGreaterThanOrEqual(4);
    // Live chunks keep coming after the replay; then the turn is stopped.
    await reaching(resumer, 2 + ack.replayed + 10);
    const ends = Promise.all([turnEnd(stay.socket), turnEnd(resumer)]);
    await stay.socket.emitWithAck('abort', { sessionId });
    await ends;

    const expected = streamOf(stay.seen, turnId).filter((e) => e.payload.seq > 2);
    const got = streamOf(resumerSeen, turnId);
    expect(got.map((e) => e.payload.seq)).toEqual(got.map((_, i) => i + 3));
    expect(got).toEqual(expected);
    expect(got.at(-1)?.payload).toMatchObject({ phase: 'end', outcome: 'aborted' });
  });

  it('a turn that ended (within 60 s) is replayed whole from afterSeq 0, ended included', async () => {
    const sessionId = 'resume-ended';
    const stay = await stayer(sessionId);
    a.server.enqueue({ text: 'all done here', chunks: 3 });
    const ended = turnEnd(stay.socket);
    await stay.socket.emitWithAck('message', { sessionId, content: 'go' });
    const { turnId } = await ended;

    const late = await a.connect();
    const lateSeen = recordSocket(late);
    const ack = await late.emitWithAck('subscribe', { sessionId, resume: { turnId, afterSeq: 0 } });

    const all = streamOf(stay.seen, turnId);
    expect(ack).toEqual({ ok: true, resumed: true, replayed: all.length });
    expect(streamOf(lateSeen, turnId)).toEqual(all);
    expect(all.at(-1)?.payload).toMatchObject({ phase: 'end', outcome: 'replied' });
    // The turn's latest usage report comes after its replayed events.
    const usage = lateSeen.filter((e) => e.event === 'usage');
    expect(usage.map((e) => e.payload)).toEqual([
      stay.seen.filter((e) => e.event === 'usage' && e.payload.turnId === turnId).at(-1)?.payload,
    ]);
  });

  it('an unknown turn (or one of another session) answers resumed: false; the client is subscribed all the same', async () => {
    const sessionId = 'resume-unknown';
    const other = await stayer('resume-unknown-other');
    a.server.enqueue({ text: 'elsewhere' });
    const otherEnd = turnEnd(other.socket);
    await other.socket.emitWithAck('message', { sessionId: 'resume-unknown-other', content: 'x' });
    const { turnId: otherTurn } = await otherEnd;
    const socket = await a.connect();

    expect(
      await socket.emitWithAck('subscribe', {
        sessionId,
        resume: { turnId: 'no-such-turn', afterSeq: 0 },
      }),
    ).toEqual({ ok: true, resumed: false, reason: 'unknown' });
    expect(
      await socket.emitWithAck('subscribe', {
        sessionId,
        resume: { turnId: otherTurn, afterSeq: 0 },
      }),
    ).toEqual({ ok: true, resumed: false, reason: 'unknown' });

    a.server.enqueue({ text: 'live' });
    const live = turnEnd(socket);
    await socket.emitWithAck('message', { sessionId, content: 'go' });
    expect(await live).toMatchObject({ sessionId, phase: 'end', outcome: 'replied' });
  });

  it("a deleted session's turns are not resumable any more", async () => {
    const sessionId = 'resume-deleted';
    const stay = await stayer(sessionId);
    a.server.enqueue({ text: 'soon gone' });
    const ended = turnEnd(stay.socket);
    await stay.socket.emitWithAck('message', { sessionId, content: 'go' });
    const { turnId } = await ended;
    const before = await a.connect();
    expect(
      await before.emitWithAck('subscribe', { sessionId, resume: { turnId, afterSeq: 0 } }),
    ).toMatchObject({ resumed: true });

    await a.http().delete(`/agent/sessions/${sessionId}`).set(a.auth).expect(204);

    const after = await a.connect();
    expect(
      await after.emitWithAck('subscribe', { sessionId, resume: { turnId, afterSeq: 0 } }),
    ).toEqual({ ok: true, resumed: false, reason: 'unknown' });
  });

  it.each([
    ['resume without turnId', { sessionId: 's', resume: { afterSeq: 0 } }, 'resume.turnId'],
    [
      'a negative afterSeq',
      { sessionId: 's', resume: { turnId: 't', afterSeq: -1 } },
      'resume.afterSeq',
    ],
    [
      'afterSeq as a string',
      { sessionId: 's', resume: { turnId: 't', afterSeq: '3' } },
      'resume.afterSeq',
    ],
    [
      'afterSeq not whole',
      { sessionId: 's', resume: { turnId: 't', afterSeq: 1.5 } },
      'resume.afterSeq',
    ],
    ['resume not an object', { sessionId: 's', resume: 'x' }, 'resume'],
    [
      'an unknown field in resume',
      { sessionId: 's', resume: { turnId: 't', afterSeq: 0, x: 1 } },
      'resume.x',
    ],
    [
      'resume with all and no sessionId',
      { all: true, resume: { turnId: 't', afterSeq: 0 } },
      'sessionId',
    ],
  ])('%s: acked with a 400 naming the field', async (_, payload, field) => {
    const socket = await a.connect();

    const ack: any = await (socket as any).emitWithAck('subscribe', payload);

    expect(ack).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(Object.keys(ack.fields)).toContain(field);
  });
});
