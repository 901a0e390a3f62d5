import fc from 'fast-check';
import { SessionLane, type LaneInput } from '../../../../src/agent/engine/session-lane';

/** A lane whose inputs carry their own name as payload, for readable assertions. */
function lane(): SessionLane<string> {
  return new SessionLane<string>();
}

let seq = 0;
function human(name: string): LaneInput<string> {
  return { seq: ++seq, payload: name };
}
function sourced(name: string, source = 'scheduler'): LaneInput<string> {
  return { seq: ++seq, source, payload: name };
}
const names = (inputs: readonly LaneInput<string>[] | undefined) => inputs?.map((i) => i.payload);

describe('SessionLane', () => {
  describe('S2: where an arriving input goes', () => {
    it('S2: with nothing running every input queues, and openNext opens it', () => {
      const l = lane();
      expect(l.idle).toBe(true);
      expect(l.arrive(human('H1'))).toBe('queued');
      expect(names(l.waitingInputs())).toEqual(['H1']);
      expect(names(l.openNext('T1'))).toEqual(['H1']);
      expect(l.running).toEqual({ turnId: 'T1', humanOpened: true, acceptsInsertions: true });
      expect(l.waitingInputs()).toEqual([]);
      expect(l.idle).toBe(false);
    });

    it('S2: a human input during a human-opened turn is pending insertion', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      expect(l.arrive(human('H2'))).toBe('pending');
      expect(names(l.waitingInputs())).toEqual(['H2']);
    });

    it('S2: a human input during a sourced turn queues behind it', () => {
      const l = lane();
      l.arrive(sourced('C1'));
      expect(l.openNext('T1')).toHaveLength(1);
      expect(l.running?.humanOpened).toBe(false);
      expect(l.arrive(human('H1'))).toBe('queued');
      expect(l.takePending('T1')).toEqual([]);
      expect(names(l.waitingInputs())).toEqual(['H1']);
    });

    it('S2/I1: a sourced input always queues, also during a human-opened turn', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      expect(l.arrive(sourced('C1'))).toBe('queued');
      expect(l.takePending('T1')).toEqual([]);
      expect(names(l.waitingInputs())).toEqual(['C1']);
    });

    it('I1: openNext opens nothing while a turn runs (one running turn per session)', () => {
      const l = lane();
      l.arrive(sourced('C1'));
      l.openNext('T1');
      l.arrive(sourced('C2'));
      expect(l.openNext('T2')).toBeUndefined();
      expect(l.running?.turnId).toBe('T1');
    });

    it('openNext on an empty idle lane opens nothing', () => {
      const l = lane();
      expect(l.openNext('T1')).toBeUndefined();
      expect(l.running).toBeUndefined();
    });
  });

  describe('I3: batch opening', () => {
    it('I3: the maximal run of human inputs at the head opens one turn', () => {
      const l = lane();
      l.arrive(sourced('C0'));
      l.openNext('T0');
      for (const input of [human('H1'), human('H2'), sourced('C1'), human('H3')]) l.arrive(input);
      l.settle('T0');
      expect(names(l.openNext('T1'))).toEqual(['H1', 'H2']);
      expect(l.running).toMatchObject({ turnId: 'T1', humanOpened: true });
      expect(names(l.waitingInputs())).toEqual(['C1', 'H3']);
    });

    it('I3: a sourced head opens a turn alone, even with sourced inputs of the same source behind it', () => {
      const l = lane();
      l.arrive(sourced('C0'));
      l.openNext('T0');
      for (const input of [sourced('C1'), sourced('C2'), human('H1')]) l.arrive(input);
      l.settle('T0');
      expect(names(l.openNext('T1'))).toEqual(['C1']);
      expect(l.running?.humanOpened).toBe(false);
      l.settle('T1');
      expect(names(l.openNext('T2'))).toEqual(['C2']);
      l.settle('T2');
      expect(names(l.openNext('T3'))).toEqual(['H1']);
    });

    it('S2: the inputs of one turn share source (humans never batch with sourced inputs)', () => {
      const l = lane();
      l.arrive(sourced('C0'));
      l.openNext('T0');
      for (const input of [human('H1'), sourced('C1', 'webhook'), sourced('C2', 'webhook')]) {
        l.arrive(input);
      }
      l.settle('T0');
      const opened = [l.openNext('T1')!];
      l.settle('T1');
      opened.push(l.openNext('T2')!);
      l.settle('T2');
      opened.push(l.openNext('T3')!);
      expect(opened.map(names)).toEqual([['H1'], ['C1'], ['C2']]);
    });
  });

  describe('I2: takePending and closeInsertions', () => {
    it('I2: takePending takes the pending insertions in arrival order and leaves queued ones', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      for (const input of [human('H2'), sourced('C1'), human('H3')]) l.arrive(input);
      expect(names(l.takePending('T1'))).toEqual(['H2', 'H3']);
      expect(names(l.waitingInputs())).toEqual(['C1']);
      expect(l.takePending('T1')).toEqual([]);
    });

    it('I2: takePending is only for the running turn', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      l.arrive(human('H2'));
      expect(l.takePending('T0')).toEqual([]);
      expect(names(l.waitingInputs())).toEqual(['H2']);
    });

    it('I2: after closeInsertions no insertion is taken and later humans queue', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      l.arrive(human('H2'));
      l.closeInsertions('T1');
      expect(l.running?.acceptsInsertions).toBe(false);
      expect(l.takePending('T1')).toEqual([]);
      expect(l.arrive(human('H3'))).toBe('queued');
      expect(names(l.waitingInputs())).toEqual(['H2', 'H3']);
    });

    it('I2: closeInsertions for another turn id changes nothing', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      l.closeInsertions('T0');
      expect(l.running?.acceptsInsertions).toBe(true);
      expect(l.arrive(human('H2'))).toBe('pending');
    });

    it('S2: a human that queued behind a sourced turn stays queued; only new arrivals become pending', () => {
      const l = lane();
      l.arrive(sourced('C1'));
      l.openNext('T1');
      for (const input of [human('H2'), sourced('C3'), human('H5')]) l.arrive(input);
      l.settle('T1');
      expect(names(l.openNext('T2'))).toEqual(['H2']);
      expect(l.arrive(human('H6'))).toBe('pending');
      expect(names(l.takePending('T2'))).toEqual(['H6']);
      expect(names(l.waitingInputs())).toEqual(['C3', 'H5']);
    });
  });

  describe('settle (timeline 3)', () => {
    it('S2/I2: leftover pending insertions become queued, arrival order kept with queued ones', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      expect(l.arrive(sourced('C1'))).toBe('queued');
      expect(l.arrive(human('H2'))).toBe('pending');
      expect(l.arrive(human('H3'))).toBe('pending');
      expect(names(l.waitingInputs())).toEqual(['C1', 'H2', 'H3']);
      expect(l.settle('T1')).toBe(true);
      expect(l.running).toBeUndefined();
      expect(names(l.waitingInputs())).toEqual(['C1', 'H2', 'H3']);
      expect(names(l.openNext('T2'))).toEqual(['C1']);
      expect(l.running?.humanOpened).toBe(false);
      // H2, H3 were pending for T1; after it settled they are plain queued inputs.
      expect(l.takePending('T2')).toEqual([]);
      expect(l.arrive(human('H4'))).toBe('queued');
      expect(names(l.waitingInputs())).toEqual(['H2', 'H3', 'H4']);
      l.settle('T2');
      expect(names(l.openNext('T3'))).toEqual(['H2', 'H3', 'H4']);
    });

    it('settle of another turn id is refused and changes nothing', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      l.arrive(human('H2'));
      expect(l.settle('T0')).toBe(false);
      expect(l.running?.turnId).toBe('T1');
      expect(names(l.takePending('T1'))).toEqual(['H2']);
    });

    it('a settled lane with nothing waiting is idle', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      l.settle('T1');
      expect(l.idle).toBe(true);
    });
  });

  describe('dropWaiting (S3 queued, S4, S7, S9)', () => {
    it('drops pending and queued inputs in arrival order and leaves the running turn', () => {
      const l = lane();
      l.arrive(human('H1'));
      l.openNext('T1');
      for (const input of [sourced('C1'), human('H2')]) l.arrive(input);
      expect(names(l.dropWaiting())).toEqual(['C1', 'H2']);
      expect(l.waitingInputs()).toEqual([]);
      expect(l.running?.turnId).toBe('T1');
      expect(l.takePending('T1')).toEqual([]);
      expect(l.dropWaiting()).toEqual([]);
    });

    it('dropping on an idle lane drops nothing', () => {
      expect(lane().dropWaiting()).toEqual([]);
    });
  });

  describe('model-based (fast-check)', () => {
    type Op =
      | { op: 'arrive'; human: boolean }
      | { op: 'open' }
      | { op: 'take'; stale: boolean }
      | { op: 'close'; stale: boolean }
      | { op: 'settle'; stale: boolean }
      | { op: 'drop' };

    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        arbitrary: fc.record({ op: fc.constant('arrive' as const), human: fc.boolean() }),
        weight: 5,
      },
      { arbitrary: fc.record({ op: fc.constant('open' as const) }), weight: 3 },
      {
        arbitrary: fc.record({ op: fc.constant('take' as const), stale: fc.boolean() }),
        weight: 3,
      },
      {
        arbitrary: fc.record({ op: fc.constant('close' as const), stale: fc.boolean() }),
        weight: 1,
      },
      {
        arbitrary: fc.record({ op: fc.constant('settle' as const), stale: fc.boolean() }),
        weight: 2,
      },
      { arbitrary: fc.record({ op: fc.constant('drop' as const) }), weight: 1 },
    );

    /** The reference model: the rules of S2 / I2 / I3 written out as plainly as possible. */
    interface ModelInput {
      seq: number;
      human: boolean;
      pending: boolean;
    }

    it('S2/I1-I3: one running turn, every input leaves exactly once, arrival order kept', () => {
      fc.assert(
        fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
          const l = new SessionLane<number>();
          const model: ModelInput[] = [];
          let running: { turnId: string; human: boolean; accepts: boolean } | undefined;
          let turns = 0;
          let nextSeq = 0;
          const left = new Map<number, string>();
          const leave = (seqs: number[], how: string) => {
            for (const s of seqs) {
              expect(left.has(s)).toBe(false);
              left.set(s, how);
            }
          };

          const check = () => {
            const waiting = l.waitingInputs().map((i) => i.seq);
            expect(waiting).toEqual(model.map((m) => m.seq));
            expect([...waiting].sort((a, b) => a - b)).toEqual(waiting);
            expect(l.running?.turnId).toBe(running?.turnId);
            expect(l.idle).toBe(!running && !model.length);
          };

          const apply = (op: Op) => {
            switch (op.op) {
              case 'arrive': {
                const s = ++nextSeq;
                const pending = op.human && !!running?.human && running.accepts;
                const got = l.arrive({
                  seq: s,
                  ...(op.human ? {} : { source: 'job' }),
                  payload: s,
                });
                expect(got).toBe(pending ? 'pending' : 'queued');
                model.push({ seq: s, human: op.human, pending });
                break;
              }
              case 'open': {
                const turnId = `T${++turns}`;
                const opened = l.openNext(turnId);
                if (running || !model.length) {
                  expect(opened).toBeUndefined();
                  break;
                }
                let count = 1;
                if (model[0].human) while (count < model.length && model[count].human) count++;
                const expected = model.splice(0, count);
                expect(opened!.map((i) => i.seq)).toEqual(expected.map((m) => m.seq));
                // One turn's inputs share source; a sourced input is alone.
                expect(new Set(opened!.map((i) => i.source)).size).toBe(1);
                if (opened![0].source !== undefined) expect(opened).toHaveLength(1);
                running = { turnId, human: expected[0].human, accepts: true };
                leave(
                  expected.map((m) => m.seq),
                  `opened:${turnId}`,
                );
                break;
              }
              case 'take': {
                const turnId = op.stale || !running ? 'stale' : running.turnId;
                const taken = l.takePending(turnId).map((i) => i.seq);
                const expected =
                  running && turnId === running.turnId && running.accepts
                    ? model.filter((m) => m.pending)
                    : [];
                expect(taken).toEqual(expected.map((m) => m.seq));
                for (const m of expected) model.splice(model.indexOf(m), 1);
                leave(taken, `joined:${turnId}`);
                // Only a human-opened turn ever has insertions.
                if (taken.length) expect(running!.human).toBe(true);
                break;
              }
              case 'close': {
                const turnId = op.stale || !running ? 'stale' : running.turnId;
                l.closeInsertions(turnId);
                if (running && turnId === running.turnId) running.accepts = false;
                break;
              }
              case 'settle': {
                const turnId = op.stale || !running ? 'stale' : running.turnId;
                const ok = l.settle(turnId);
                expect(ok).toBe(!!running && turnId === running.turnId);
                if (ok) {
                  running = undefined;
                  for (const m of model) m.pending = false;
                }
                break;
              }
              case 'drop': {
                const dropped = l.dropWaiting().map((i) => i.seq);
                expect(dropped).toEqual(model.map((m) => m.seq));
                model.splice(0);
                leave(dropped, 'dropped');
                break;
              }
            }
            check();
          };

          for (const op of ops) apply(op);
          // Drain: every input must leave, each exactly once.
          for (let guard = 0; !l.idle && guard < 200; guard++) {
            if (running) apply({ op: 'settle', stale: false });
            else apply({ op: 'open' });
          }
          expect(l.idle).toBe(true);
          expect([...left.keys()].sort((a, b) => a - b)).toEqual(
            Array.from({ length: nextSeq }, (_, i) => i + 1),
          );
        }),
        { numRuns: process.env.CI ? 1000 : 300 },
      );
    });
  });
});
