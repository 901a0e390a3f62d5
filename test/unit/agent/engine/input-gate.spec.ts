import { HookRegistry } from '../../../../src/hooks';
import {
  InvalidInputError,
  type Admission,
  type IncomingMessage,
  type NewMessage,
  type WorkDispatcher,
} from '../../../../src/contracts';
import { HoldTable } from '../../../../src/distribution/hold-table';
import { AgentInstrumentation } from '../../../../src/agent/instrumentation';
import { Deferred } from '../../../../src/agent/engine/deferred';
import { InputGate, type GatePorts } from '../../../../src/agent/engine/input-gate';
import { MemoryInputInbox } from '../../../../src/session-bridge';

/**
 * The gate against stub stores whose generation reads can be held, and a recording dispatcher
 * whose holds are a real `HoldTable`: it refuses inputs of a held session, as dispatchers do.
 */
function setup() {
  const reads: Deferred<number>[] = [];
  let holdReads = false;
  let generation = 0;
  const archived: NewMessage[] = [];
  const entered: IncomingMessage[] = [];
  const holds = new HoldTable();
  const deps = {
    hooks: new HookRegistry(),
    sessions: {
      generationOf: async () => {
        if (!holdReads) return generation;
        const read = new Deferred<number>();
        reads.push(read);
        return read.promise;
      },
      ensure: async () => ({}),
    },
    inbox: new MemoryInputInbox(),
    archive: {
      append: async (messages: NewMessage[]) => {
        archived.push(...messages);
        return [];
      },
    },
    events: { emit: () => undefined },
    instrumentation: new AgentInstrumentation(),
  } as unknown as GatePorts;
  const dispatcher = {
    whenFree: (sessionId: string, signal?: AbortSignal) => holds.whenFree(sessionId, signal),
    submit: (message: IncomingMessage): Promise<Admission> => {
      if (holds.isHeld(message.sessionId)) {
        return Promise.resolve({ accepted: false, reason: 'held' });
      }
      entered.push(message);
      return Promise.resolve({ accepted: true, settlement: new Promise(() => undefined) });
    },
  } as unknown as WorkDispatcher;
  const gate = new InputGate(deps, dispatcher);
  return {
    gate,
    holds,
    archived,
    entered,
    reads,
    holdReads: () => (holdReads = true),
    setGeneration: (n: number) => (generation = n),
  };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('InputGate', () => {
  it('tells the inbox which ids it generated (those can be forgotten once settled)', async () => {
    const accept = jest.spyOn(MemoryInputInbox.prototype, 'accept');
    const t = setup();

    void t.gate.handle({ sessionId: 's', content: 'no id' });
    void t.gate.handle({ sessionId: 's', content: 'an id', id: 'client-1' });
    await flush();

    expect(accept.mock.calls.map(([message, options]) => [message.content, options])).toEqual([
      ['no id', { generatedId: true }],
      ['an id', undefined],
    ]);
    accept.mockRestore();
  });

  it('S1: an invalid input rejects; handleMessage never throws synchronously', async () => {
    const t = setup();
    let promise: Promise<unknown> | undefined;
    expect(() => (promise = t.gate.handle({ content: 'x' } as IncomingMessage))).not.toThrow();
    await expect(promise).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('S9: an input whose last generation read spans the start of shutdown is dropped, not entered', async () => {
    const t = setup();
    t.holdReads();
    const settled = t.gate.handle({ sessionId: 's', content: 'racing' });
    await flush();
    t.reads[0].resolve(0); // the read on entry
    await flush();
    expect(t.reads).toHaveLength(2); // the read right before the hand-off is under way
    t.gate.close();
    t.reads[1].resolve(0);
    let outcome: unknown;
    void settled.then((s) => (outcome = s));
    await flush();
    // Before archiving, the gate checks once more that the session was not deleted meanwhile.
    for (const read of t.reads) read.resolve(0);
    await flush();
    expect(t.entered).toEqual([]);
    expect(outcome).toEqual({ settled: 'dropped', reason: 'shutdown' });
    expect(t.archived.map((m) => m.content)).toEqual(['racing']);
  });

  it('S7: a generation change between entry and hand-off drops the input unarchived', async () => {
    const t = setup();
    t.holdReads();
    const settled = t.gate.handle({ sessionId: 's', content: 'old' });
    await flush();
    t.reads[0].resolve(4);
    await flush();
    t.reads[1].resolve(5);
    expect(await settled).toEqual({ settled: 'dropped', reason: 'stale-generation' });
    expect(t.entered).toEqual([]);
    expect(t.archived).toEqual([]);
  });

  it('S7/I14: an input of a deleted generation is not archived at shutdown', async () => {
    const t = setup();
    t.holdReads();
    const settled = t.gate.handle({ sessionId: 's', content: 'old' });
    await flush();
    t.reads[0].resolve(0);
    await flush();
    t.gate.markDeleted('s');
    t.gate.close();
    t.reads[1].resolve(1);
    expect(await settled).toEqual({ settled: 'dropped', reason: 'stale-generation' });
    expect(t.archived).toEqual([]);
    expect(t.entered).toEqual([]);
  });

  it('S7: a local deletion mark drops inputs that entered before it', async () => {
    const t = setup();
    t.holdReads();
    const settled = t.gate.handle({ sessionId: 's', content: 'old' });
    await flush();
    t.gate.markDeleted('s');
    t.reads[0].resolve(0);
    await flush();
    t.reads[1].resolve(0);
    expect(await settled).toEqual({ settled: 'dropped', reason: 'stale-generation' });
    expect(t.entered).toEqual([]);
  });

  it('I11: a held session keeps its input at the gate until released', async () => {
    const t = setup();
    const release = t.holds.hold(undefined);
    void t.gate.handle({ sessionId: 'fresh', content: 'waits' });
    await flush();
    expect(t.entered).toEqual([]);
    release();
    await flush();
    expect(t.entered.map((m) => m.content)).toEqual(['waits']);
  });
});
