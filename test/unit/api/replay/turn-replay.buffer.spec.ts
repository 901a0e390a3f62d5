import {
  REPLAY_TTL_MS,
  TurnReplayBuffer,
  type TurnReplayOptions,
  type TurnStreamEntry,
} from '../../../../src/api/replay/turn-replay.buffer';

const SESSION = 'session-1';

/** Builds the events of one turn, numbering them as the engine does. */
function turnOf(turnId: string, sessionId = SESSION) {
  let seq = 0;
  return {
    start: () => ({ sessionId, turnId, inputs: [], seq: ++seq }),
    delta: (delta: string) => ({ sessionId, turnId, seq: ++seq, delta }),
    tool: (phase: 'start' | 'end') => ({
      sessionId,
      turnId,
      callId: 'c1',
      name: 'clock',
      phase,
      seq: ++seq,
    }),
    done: () => ({ sessionId, turnId, seq: ++seq, done: true }),
    end: () => ({ sessionId, turnId, outcome: 'replied' as const, seq: ++seq }),
    skip: () => ++seq,
  };
}

/** A turn of `deltas` chunks, recorded whole (start, deltas, stream end, turn end). */
function recordTurn(sut: TurnReplayBuffer, turnId: string, deltas: number, ended = true) {
  const t = turnOf(turnId);
  sut.record('agent:turn:start', t.start());
  for (let i = 0; i < deltas; i++) sut.record('outbound:stream', t.delta(`d${i}`));
  if (!ended) return;
  sut.record('outbound:stream', t.done());
  sut.record('agent:turn:end', t.end());
}

const seqs = (entries: TurnStreamEntry[]) => entries.map((e) => e.event.seq);

describe('TurnReplayBuffer', () => {
  let sut: TurnReplayBuffer;
  const setup = (options?: TurnReplayOptions) => (sut = new TurnReplayBuffer(options));

  afterEach(() => {
    sut?.clear();
    jest.useRealTimers();
  });

  describe('order', () => {
    it('replays the events after afterSeq in seq order, with their names and payloads', () => {
      setup();
      const t = turnOf('t1');
      const start = t.start();
      const delta = t.delta('Hel');
      const toolStart = t.tool('start');
      const toolEnd = t.tool('end');
      sut.record('agent:turn:start', start);
      sut.record('outbound:stream', delta);
      sut.record('tool:execute', toolStart);
      sut.record('tool:execute', toolEnd);

      expect(sut.replay(SESSION, 't1', 0)).toEqual({
        status: 'ok',
        ended: false,
        entries: [
          { name: 'agent:turn:start', event: start },
          { name: 'outbound:stream', event: delta },
          { name: 'tool:execute', event: toolStart },
          { name: 'tool:execute', event: toolEnd },
        ],
      });
      const after2 = sut.replay(SESSION, 't1', 2);
      expect(after2.status === 'ok' && seqs(after2.entries)).toEqual([3, 4]);
    });

    it('afterSeq at or past the last event: nothing to replay, still resumed', () => {
      setup();
      recordTurn(sut, 't1', 2, false);

      expect(sut.replay(SESSION, 't1', 3)).toEqual({ status: 'ok', entries: [], ended: false });
      expect(sut.replay(SESSION, 't1', 99)).toEqual({ status: 'ok', entries: [], ended: false });
    });

    it('keeps the payload objects (no copy) and ignores a repeated seq', () => {
      setup();
      const t = turnOf('t1');
      const start = t.start();
      sut.record('agent:turn:start', start);
      sut.record('agent:turn:start', { ...start, inputs: [{ sessionId: SESSION, content: 'x' }] });

      const replay = sut.replay(SESSION, 't1', 0);
      expect(replay.status === 'ok' && replay.entries[0].event).toBe(start);
      expect(replay.status === 'ok' && replay.entries).toHaveLength(1);
    });

    it('ended is true once the turn end is kept', () => {
      setup();
      recordTurn(sut, 't1', 1);

      expect(sut.replay(SESSION, 't1', 0)).toMatchObject({ status: 'ok', ended: true });
    });

    it('events without turnId or seq are not part of a turn stream', () => {
      setup();
      sut.record('outbound:stream', { sessionId: SESSION, done: true });
      sut.record('outbound:stream', { sessionId: SESSION, turnId: 't1', delta: 'x' });

      expect(sut.size).toBe(0);
    });

    it('unknown: a turn never seen, or asked for under another session', () => {
      setup();
      recordTurn(sut, 't1', 1);

      expect(sut.replay(SESSION, 'nope', 0)).toEqual({ status: 'unknown' });
      expect(sut.replay('other-session', 't1', 0)).toEqual({ status: 'unknown' });
    });

    it('a gap in seq (events not seen here): what came before it is incomplete', () => {
      setup();
      const t = turnOf('t1');
      sut.record('agent:turn:start', t.start());
      t.skip();
      sut.record('outbound:stream', t.delta('b'));

      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'incomplete' });
      const after2 = sut.replay(SESSION, 't1', 2);
      expect(after2.status === 'ok' && seqs(after2.entries)).toEqual([3]);
    });
  });

  describe('TTL', () => {
    it('an ended turn stays resumable 60 s after its end, then is dropped', () => {
      jest.useFakeTimers();
      setup();
      recordTurn(sut, 't1', 2);

      jest.advanceTimersByTime(REPLAY_TTL_MS - 1);
      expect(sut.replay(SESSION, 't1', 0)).toMatchObject({ status: 'ok', ended: true });

      jest.advanceTimersByTime(1);
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'unknown' });
      expect(sut.size).toBe(0);
    });

    it('a running turn is kept however long it runs', () => {
      jest.useFakeTimers();
      setup();
      recordTurn(sut, 't1', 2, false);

      jest.advanceTimersByTime(10 * REPLAY_TTL_MS);

      expect(sut.replay(SESSION, 't1', 0)).toMatchObject({ status: 'ok', ended: false });
    });

    it('the TTL runs from the turn end, which may come later than the stream end', () => {
      jest.useFakeTimers();
      setup({ ttlMs: 1000 });
      const t = turnOf('t1');
      sut.record('agent:turn:start', t.start());
      sut.record('outbound:stream', t.done());
      jest.advanceTimersByTime(800);
      sut.record('agent:turn:end', t.end());

      jest.advanceTimersByTime(800);
      expect(sut.replay(SESSION, 't1', 0)).toMatchObject({ status: 'ok', ended: true });
      jest.advanceTimersByTime(200);
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'unknown' });
    });

    it('a turn blocked by agent:turn:before (only its stream end) expires too', () => {
      jest.useFakeTimers();
      setup({ ttlMs: 1000 });
      sut.record('outbound:stream', turnOf('t1').done());

      jest.advanceTimersByTime(1000);

      expect(sut.size).toBe(0);
    });
  });

  describe('bounds', () => {
    it('a turn keeps its last maxEventsPerTurn events: a resume needing an older one is incomplete', () => {
      setup({ maxEventsPerTurn: 4 });
      recordTurn(sut, 't1', 5, false); // seq 1..6

      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'incomplete' });
      expect(sut.replay(SESSION, 't1', 1)).toEqual({ status: 'incomplete' });
      const after2 = sut.replay(SESSION, 't1', 2);
      expect(after2.status === 'ok' && seqs(after2.entries)).toEqual([3, 4, 5, 6]);
      const after4 = sut.replay(SESSION, 't1', 4);
      expect(after4.status === 'ok' && seqs(after4.entries)).toEqual([5, 6]);
    });

    it('the ring keeps order across many wraps', () => {
      setup({ maxEventsPerTurn: 3 });
      recordTurn(sut, 't1', 100, false); // seq 1..101

      const replay = sut.replay(SESSION, 't1', 98);
      expect(replay.status === 'ok' && seqs(replay.entries)).toEqual([99, 100, 101]);
    });

    it('past maxTurns the turn first seen longest ago is dropped (unknown)', () => {
      setup({ maxTurns: 2 });
      recordTurn(sut, 't1', 1, false);
      recordTurn(sut, 't2', 1);
      recordTurn(sut, 't3', 1);

      expect(sut.size).toBe(2);
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'unknown' });
      expect(sut.replay(SESSION, 't2', 0)).toMatchObject({ status: 'ok' });
      expect(sut.replay(SESSION, 't3', 0)).toMatchObject({ status: 'ok' });
    });

    it('a dropped turn that goes on streaming comes back incomplete, not from seq 1', () => {
      setup({ maxTurns: 1 });
      const t = turnOf('t1');
      sut.record('agent:turn:start', t.start());
      recordTurn(sut, 't2', 1, false);
      sut.record('outbound:stream', t.delta('late'));

      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'incomplete' });
      const after1 = sut.replay(SESSION, 't1', 1);
      expect(after1.status === 'ok' && seqs(after1.entries)).toEqual([2]);
    });
  });

  it("forgetSession drops that session's turns only", () => {
    setup();
    recordTurn(sut, 't1', 1);
    const other = turnOf('t2', 'session-2');
    sut.record('agent:turn:start', other.start());

    sut.forgetSession(SESSION);

    expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'unknown' });
    expect(sut.replay('session-2', 't2', 0)).toMatchObject({ status: 'ok' });
  });

  describe('backfill (distributed mode: a turn log kept in Redis)', () => {
    /** The entries of one whole turn of `deltas` chunks, as a Redis log holds them. */
    function logOf(turnId: string, deltas: number): TurnStreamEntry[] {
      const t = turnOf(turnId);
      return [
        { name: 'agent:turn:start', event: t.start() },
        ...Array.from({ length: deltas }, (_, i) => ({
          name: 'outbound:stream' as const,
          event: t.delta(`d${i}`),
        })),
        { name: 'outbound:stream', event: t.done() },
        { name: 'agent:turn:end', event: t.end() },
      ];
    }

    it('a turn never seen here becomes resumable from its start, ended included', () => {
      setup();
      sut.backfill(SESSION, 't1', logOf('t1', 3));
      const replay = sut.replay(SESSION, 't1', 0);
      expect(replay.status === 'ok' && seqs(replay.entries)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(replay).toMatchObject({ ended: true });
    });

    it('joins the events kept here (heard live from seq 4 on) with the older ones, once each', () => {
      setup();
      const log = logOf('t1', 4);
      for (const entry of log.slice(3, 5)) sut.record(entry.name, entry.event);
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'incomplete' });

      sut.backfill(SESSION, 't1', log.slice(0, 4));
      const replay = sut.replay(SESSION, 't1', 0);
      expect(replay.status === 'ok' && seqs(replay.entries)).toEqual([1, 2, 3, 4, 5]);
      // The rest arrives live; a repeated one is refused.
      expect(sut.record(log[3].name, log[3].event as never)).toBe(false);
      expect(sut.record(log[5].name, log[5].event as never)).toBe(true);
    });

    it("a log with a gap keeps what follows the gap only; another session's turn is left alone", () => {
      setup();
      const log = logOf('t1', 4);
      sut.backfill(SESSION, 't1', [...log.slice(0, 2), ...log.slice(3)]);
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'incomplete' });
      const replay = sut.replay(SESSION, 't1', 3);
      expect(replay.status === 'ok' && seqs(replay.entries)).toEqual([4, 5, 6, 7]);

      sut.backfill('session-2', 't1', logOf('t1', 1));
      expect(sut.replay('session-2', 't1', 0)).toEqual({ status: 'unknown' });
    });

    it("keeps a turn's latest usage report, also one from a backfill", () => {
      setup();
      recordTurn(sut, 't1', 1, false);
      const usage = (used: number, turnId = 't1') => ({ sessionId: SESSION, turnId, used }) as any;
      sut.recordUsage(usage(10));
      sut.recordUsage(usage(20));
      sut.recordUsage(usage(5, 'unknown-turn'));
      expect(sut.replay(SESSION, 't1', 0)).toMatchObject({ status: 'ok', usage: { used: 20 } });

      sut.backfill(SESSION, 't2', [
        ...logOf('t2', 1),
        { name: 'token:usage', event: usage(7, 't2') },
        { name: 'token:usage', event: usage(9, 't2') },
      ]);
      expect(sut.replay(SESSION, 't2', 0)).toMatchObject({ status: 'ok', usage: { used: 9 } });
    });

    it('forget drops one turn', () => {
      setup();
      recordTurn(sut, 't1', 1);
      recordTurn(sut, 't2', 1);
      sut.forget('t1');
      expect(sut.replay(SESSION, 't1', 0)).toEqual({ status: 'unknown' });
      expect(sut.replay(SESSION, 't2', 0)).toMatchObject({ status: 'ok' });
    });
  });
});
