import type {
  IncomingMessage,
  Message,
  NewMessage,
  Settlement,
  TurnEnd,
} from '../../../../src/contracts';
import { HoldTable } from '../../../../src/distribution/hold-table';
import type { TurnConclusion } from '../../../../src/agent/instrumentation';
import { Deferred } from '../../../../src/agent/engine/deferred';
import type { LaneHandle } from '../../../../src/agent/engine/ports';
import type { Turn } from '../../../../src/agent/engine/turn';
import { TurnScheduler, type TurnRunnerLike } from '../../../../src/agent/engine/turn-scheduler';
import { MemoryInputInbox } from '../../../../src/session-bridge';

/**
 * The scheduler against a scripted runner and archive: each turn runs until the test ends it,
 * and archive writes can be held, so the gaps between a turn's end and its lane settling can be
 * hit on purpose.
 */
function setup() {
  const runs: { turn: Turn; lane: LaneHandle; end: Deferred<TurnConclusion> }[] = [];
  const runner: TurnRunnerLike = {
    run: (turn, lane) => {
      const end = new Deferred<TurnConclusion>();
      runs.push({ turn, lane, end });
      return end.promise;
    },
  };
  const archived: NewMessage[] = [];
  let gate: Deferred<void> | undefined;
  const events: { name: string; payload: any }[] = [];
  const inbox = new MemoryInputInbox();
  const deps = {
    inbox,
    archive: {
      append: async (messages: NewMessage[]): Promise<Message[]> => {
        if (gate) await gate.promise;
        archived.push(...messages);
        return messages.map((m, i): Message => ({
          ...m,
          id: `m${archived.length + i}`,
          createdAt: '',
        }));
      },
    },
    events: {
      emit: (name: string, payload: unknown) => events.push({ name, payload }),
      hasListeners: () => true,
    },
    options: { maxWaiting: 1000 },
  } as unknown as ConstructorParameters<typeof TurnScheduler>[0];
  const holds = new HoldTable();
  const scheduler = new TurnScheduler(deps, runner, { isHeld: (id) => holds.isHeld(id) });
  const settled = new Map<string, Settlement>();
  const enter = (message: IncomingMessage) => {
    void scheduler.enter(message).then((s) => settled.set(message.content, s));
  };
  /** Ends the `index`th turn with `outcome`. */
  const endTurn = (index: number, outcome: TurnEnd['outcome']) =>
    runs[index].end.resolve({ turnId: runs[index].turn.id, outcome });
  return {
    scheduler,
    inbox,
    runs,
    endTurn,
    archived,
    events,
    settled,
    enter,
    holdArchive: () => (gate = new Deferred<void>()),
    releaseArchive: () => {
      gate?.resolve();
      gate = undefined;
    },
  };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
const human = (content: string): IncomingMessage => ({ sessionId: 's', content });
const job = (content: string): IncomingMessage => ({ sessionId: 's', content, source: 'job' });

describe('TurnScheduler', () => {
  it('S3/I6: inputs dropped while earlier drops are being archived are archived and settled too', async () => {
    const t = setup();
    t.enter(human('H1'));
    t.enter(job('C1'));
    expect(t.scheduler.abort('s', { queued: true })).toBe(true);
    t.holdArchive();
    t.endTurn(0, 'aborted');
    await flush();
    // T1 has ended; C1 is being archived. C2 arrives and is dropped in this gap.
    expect(t.settled.get('H1')).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    t.enter(job('C2'));
    expect(t.scheduler.waiting('s').map((m) => m.content)).toEqual(['C2']);
    expect(t.scheduler.abort('s', { queued: true })).toBe(false);
    t.releaseArchive();
    await flush();
    expect(t.archived.map((m) => m.content)).toEqual(['C1', 'C2']);
    expect(t.settled.get('C1')).toEqual({ settled: 'dropped', reason: 'aborted' });
    expect(t.settled.get('C2')).toEqual({ settled: 'dropped', reason: 'aborted' });
    expect(t.runs).toHaveLength(1);
    expect(t.scheduler.activeSessions()).toEqual([]);
  });

  it('S9: a shutdown drop in the same gap is not left behind for a later turn', async () => {
    const t = setup();
    t.enter(human('H1'));
    t.enter(job('C1'));
    t.scheduler.abort('s', { queued: true });
    t.holdArchive();
    t.endTurn(0, 'aborted');
    await flush();
    t.enter(job('C2'));
    const stopped = t.scheduler.stop('s', 'shutdown');
    t.releaseArchive();
    await stopped;
    expect(t.settled.get('C2')).toEqual({ settled: 'dropped', reason: 'shutdown' });
    expect(t.archived.map((m) => m.content)).toEqual(['C1', 'C2']);
    expect(t.runs).toHaveLength(1);
  });

  it('S4 (timeline 5): clearing settles the dropped inputs at once, before the running turn ends', async () => {
    const t = setup();
    t.enter(human('H1'));
    t.enter(job('C1'));
    const stopped = t.scheduler.stop('s', 'cleared');
    await Promise.resolve();
    expect(t.settled.get('C1')).toEqual({ settled: 'dropped', reason: 'cleared' });
    expect(t.runs[0].turn.signal.aborted).toBe(true);
    expect(t.settled.has('H1')).toBe(false);
    t.endTurn(0, 'aborted');
    await stopped;
    expect(t.settled.get('H1')).toMatchObject({ outcome: 'aborted' });
    expect(t.archived).toEqual([]);
  });

  it('S3/I5: a mismatched turnId is a full no-op, also with queued', () => {
    const t = setup();
    t.enter(human('H1'));
    t.enter(job('C1'));
    expect(t.scheduler.abort('s', { turnId: 'other', queued: true })).toBe(false);
    expect(t.runs[0].turn.signal.aborted).toBe(false);
    expect(t.scheduler.waiting('s').map((m) => m.content)).toEqual(['C1']);
    expect(t.scheduler.abort('s', { turnId: t.runs[0].turn.id })).toBe(true);
    expect(t.scheduler.abort('s', { turnId: t.runs[0].turn.id })).toBe(true);
  });

  it("enterRecorded: `recorded` resolves once the inbox has the engine's one write of the settlement (false when it failed)", async () => {
    const t = setup();
    const { inbox } = t;
    const writes: Deferred<void>[] = [];
    inbox.settle = () => {
      const write = new Deferred<void>();
      writes.push(write);
      return write.promise;
    };
    const first = t.scheduler.enterRecorded({ ...human('H1'), id: 'i1' });
    let recorded: boolean | undefined;
    void first.recorded.then((r) => (recorded = r));
    t.endTurn(0, 'replied');
    expect(await first.settlement).toMatchObject({ settled: 'turn', outcome: 'replied' });
    await flush();
    expect(writes).toHaveLength(1);
    expect(recorded).toBeUndefined();
    writes[0].resolve();
    expect(await first.recorded).toBe(true);

    inbox.settle = () => Promise.reject(new Error('database away'));
    const second = t.scheduler.enterRecorded({ ...human('H2'), id: 'i2' });
    t.endTurn(1, 'replied');
    expect(await second.recorded).toBe(false);
  });

  it('S8: agent:queue follows every change of the waiting list', async () => {
    const t = setup();
    t.enter(human('H1'));
    t.enter(human('H2'));
    t.enter(job('C1'));
    expect(t.runs[0].lane.takePending().map((p) => p.message.content)).toEqual(['H2']);
    t.endTurn(0, 'replied');
    await flush();
    const queues = t.events
      .filter((e) => e.name === 'agent:queue')
      .map((e) => e.payload.waiting.map((m: IncomingMessage) => m.content));
    expect(queues).toEqual([['H2'], ['H2', 'C1'], ['C1'], []]);
  });
});
