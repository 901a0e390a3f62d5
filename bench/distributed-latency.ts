/**
 * The latency half of the distributed-mode benchmark (`distributed.bench.ts`): per input, what
 * distributed mode adds to the same agent in one process (same PostgreSQL stores, same
 * zero-latency model), with the applications in this process so that one clock times both ends.
 *
 * - Cold: one input at a time to an idle session (sessions taken in turn), `handleMessage` to its
 *   settlement. Distributed: one instance (its wake job, the lease, the fence claim, the
 *   takeover check). The two modes take turns in blocks.
 * - Warm: the session is held because a turn of it runs (an "anchor" input whose first model
 *   call waits for a gate); the measured input, sourced, waits behind it. Per input: from
 *   `handleMessage` to the input in the holder's waiting list (`agent:queue`), plus from the end
 *   of its own turn (`agent:turn:end`) to its settlement: the way in and the way back, without
 *   the wait behind the anchor. Distributed: two instances; sent to the other instance (a poke
 *   through the holder's mailbox, the settlement back through the sender's) and to the holder.
 */
import type {
  ChatRequest,
  ChatStreamChunk,
  QueueEvent,
  TurnEndEvent,
  TurnStartEvent,
} from '../src';
import { pgAgent, replied, type PgAgent } from './support/pg-agent';
import { percentile } from './support/stats';
import { ZeroLatencyProvider } from './support/zero-latency';

/** A gate the anchor inputs' first model call waits at. */
export class Gate {
  private open: () => void = () => undefined;
  private shut = Promise.resolve();

  arm(): void {
    this.shut = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
  }

  wait(): Promise<void> {
    return this.shut;
  }
}

/** The content of an anchor input (its model call waits at the gate). */
export const ANCHOR = 'anchor: keep this session busy';

/** The zero-latency model, except that an anchor's first call waits at the gate. */
export class GatedProvider extends ZeroLatencyProvider {
  constructor(private readonly gate: Gate) {
    super();
  }

  override async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk> {
    const last = request.messages[request.messages.length - 1];
    if (last?.role === 'user' && JSON.stringify(last.content).includes(ANCHOR)) {
      await this.gate.wait();
    }
    yield* super.stream(request);
  }
}

/** The first event `name` of `app` that `match` accepts, with the time it came; `cancel` stops. */
function next<T>(app: PgAgent, name: string, match: (event: T) => boolean) {
  let listener: (event: T) => void = () => undefined;
  const promise = new Promise<{ event: T; at: number }>((resolve) => {
    listener = (event: T) => {
      if (!match(event)) return;
      app.events.off(name, listener);
      resolve({ event, at: performance.now() });
    };
    app.events.on(name, listener);
  });
  return Object.assign(promise, { cancel: () => app.events.off(name, listener) });
}

/** Milliseconds of each measured input. */
export interface LatencySamples {
  inProcess: number[];
  distributed: number[];
}

let inputs = 0;

/** One cold input: `handleMessage` to its settlement, ms. */
export async function coldInput(app: PgAgent, sessionId: string): Promise<number> {
  const at = performance.now();
  replied(await app.agent.handleMessage({ sessionId, content: `cold question ${++inputs}` }));
  return performance.now() - at;
}

/** Cold inputs: `blocks` blocks of `block` inputs per mode, the modes taking turns. */
export async function coldLatency(
  db: string,
  distributed: Parameters<typeof pgAgent>[1],
  blocks: number,
  block: number,
  warmUp: number,
): Promise<LatencySamples> {
  const apps = [await pgAgent(db), await pgAgent(db, distributed)];
  const samples: LatencySamples = { inProcess: [], distributed: [] };
  try {
    // Sessions taken in turn: each was let go long before its next input.
    const session = (mode: number, i: number) => `cold-${mode}-${i % 20}`;
    for (const [mode, app] of apps.entries()) {
      for (let i = 0; i < warmUp; i++) await coldInput(app, session(mode, i));
    }
    for (let b = 0; b < blocks; b++) {
      for (const [mode, app] of apps.entries()) {
        const into = mode === 0 ? samples.inProcess : samples.distributed;
        for (let i = 0; i < block; i++)
          into.push(await coldInput(app, session(mode, b * block + i)));
      }
    }
  } finally {
    for (const app of apps) await app.close();
  }
  return samples;
}

/**
 * One warm input: the anchor holds `sessionId` on whichever app runs it; the measured input is
 * sent to `pick(holder)`. The way in plus the way back, ms.
 */
export async function warmInput(
  apps: PgAgent[],
  gate: Gate,
  sessionId: string,
  pick: (holder: PgAgent) => PgAgent,
): Promise<number> {
  const of = (e: { sessionId: string }) => e.sessionId === sessionId;
  gate.arm();
  const starts = apps.map((app) => next<TurnStartEvent>(app, 'agent:turn:start', of));
  const anchor = apps[0].agent.handleMessage({ sessionId, content: ANCHOR, source: 'job' });
  const holder = apps[await Promise.race(starts.map((start, i) => start.then(() => i)))];
  for (const start of starts) start.cancel();
  const content = `warm question ${++inputs}`;
  const mine = (list: readonly { content?: unknown }[]) => list.some((m) => m.content === content);
  let turnId: string | undefined;
  const entered = next<QueueEvent>(holder, 'agent:queue', (e) => of(e) && mine(e.waiting));
  const ended = next<TurnEndEvent>(holder, 'agent:turn:end', (e) => e.turnId === turnId);
  const ownStart = next<TurnStartEvent>(holder, 'agent:turn:start', (e) => {
    if (of(e) && mine(e.inputs)) turnId = e.turnId;
    return turnId !== undefined;
  });
  const at = performance.now();
  const settled = pick(holder).agent.handleMessage({ sessionId, content, source: 'job' });
  const wayIn = (await entered).at - at;
  gate.release();
  await ownStart;
  const end = await ended;
  replied(await settled);
  const wayBack = performance.now() - end.at;
  replied(await anchor);
  return wayIn + wayBack;
}

/** The warm rows: in one process, and distributed sent to another instance or to the holder. */
export interface WarmSamples {
  inProcess: number[];
  viaMailbox: number[];
  toHolder: number[];
}

/**
 * Warm inputs: `blocks` blocks of `block` inputs per row, the rows taking turns. Two distributed
 * instances (`second` is the first's setting with another instance id).
 */
export async function warmLatency(
  db: string,
  first: NonNullable<Parameters<typeof pgAgent>[1]>,
  second: NonNullable<Parameters<typeof pgAgent>[1]>,
  blocks: number,
  block: number,
  warmUp: number,
): Promise<WarmSamples> {
  const gate = new Gate();
  const local = [await pgAgent(db, undefined, new GatedProvider(gate))];
  const pair = [
    await pgAgent(db, first, new GatedProvider(gate)),
    await pgAgent(db, second, new GatedProvider(gate)),
  ];
  const other = (holder: PgAgent) => (holder === pair[0] ? pair[1] : pair[0]);
  const rows: { apps: PgAgent[]; pick: (h: PgAgent) => PgAgent; into: number[] }[] = [];
  const samples: WarmSamples = { inProcess: [], viaMailbox: [], toHolder: [] };
  rows.push({ apps: local, pick: (h) => h, into: samples.inProcess });
  rows.push({ apps: pair, pick: other, into: samples.viaMailbox });
  rows.push({ apps: pair, pick: (h) => h, into: samples.toHolder });
  try {
    const session = (row: number, i: number) => `warm-${row}-${i % 20}`;
    for (const [r, row] of rows.entries()) {
      for (let i = 0; i < warmUp; i++) await warmInput(row.apps, gate, session(r, i), row.pick);
    }
    for (let b = 0; b < blocks; b++) {
      for (const [r, row] of rows.entries()) {
        for (let i = 0; i < block; i++) {
          row.into.push(await warmInput(row.apps, gate, session(r, b * block + i), row.pick));
        }
      }
    }
  } finally {
    gate.release();
    for (const app of [...pair, ...local]) await app.close();
  }
  return samples;
}

/** p50 and p99 of each, and the difference of each to the in-process samples. */
export function added(inProcess: number[], other: number[]) {
  const p50 = percentile(other, 50) - percentile(inProcess, 50);
  const p99 = percentile(other, 99) - percentile(inProcess, 99);
  return { p50, p99 };
}
