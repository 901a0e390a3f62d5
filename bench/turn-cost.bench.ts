/**
 * Turn-cost benchmark (issue 15): the steady turn of `bench/support/zero-latency.ts` (a
 * zero-latency streaming model in this process, a 50-message window, one tool call, five no-op
 * hooks, one prompt contribution, in-memory stores), with the history's stored token counts and
 * through a host's own store that returns fresh objects without them, against a bare loop that
 * makes the same model and tool calls, all in this process. Per-turn p50/p99 and turns/s for 1
 * session and for 64 sessions at once; per extra hook call and per extra streamed chunk.
 * Implementations take turns in blocks of 50 turns within each repetition (one session); medians
 * of `REPEATS`.
 *
 * Run: node -r @swc-node/register -e "require('./bench/turn-cost.bench.ts').benchTurnCost().then(console.log)"
 */
import type { ModelMessage } from '../src';
import {
  bareTurn,
  HISTORY_LIMIT,
  steadyAgent,
  WARM_UP_TURNS,
  ZeroLatencyProvider,
  type SteadyAgent,
  type SteadyOptions,
} from './support/zero-latency';
import { median, percentile } from './support/stats';

const REPEATS = Number(process.env.REPEATS ?? 5);
/** Turns per session and repetition. */
const TURNS = 400;
/** Turns one row runs before the next row's turn (one session). */
const BLOCK = 50;
const CONCURRENT = 64;
/** Turns per session and repetition with 64 sessions. */
const CONCURRENT_TURNS = 20;
const EXTRA_HOOKS = 50;
const EXTRA_CHUNKS = 200;
/** Turns run on a session of their own before measuring, so the code is optimised. */
const JIT_WARM_UP_TURNS = Number(process.env.JIT_WARM_UP ?? 3000);

interface Figures {
  p50: number;
  p99: number;
  turnsPerSecond: number;
}

/** Per-turn µs of a run, and how long it took in all. */
interface Sample {
  times: number[];
  seconds: number;
}

/** Runs `turn(session, i)` for `sessions` sessions at once, `turns` each. */
export async function sample(
  sessions: number,
  turns: number,
  turn: (session: number, i: number) => Promise<void>,
): Promise<Sample> {
  const times: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: sessions }, async (_, s) => {
      for (let i = 0; i < turns; i++) {
        const at = performance.now();
        await turn(s, i);
        times.push((performance.now() - at) * 1000);
      }
    }),
  );
  return { times, seconds: (performance.now() - started) / 1000 };
}

function figures({ times, seconds }: Sample): Figures {
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    turnsPerSecond: times.length / seconds,
  };
}

/** Runs `turn(session, i)` for `sessions` sessions at once, `turns` each; per-turn µs. */
async function measure(
  sessions: number,
  turns: number,
  turn: (session: number, i: number) => Promise<void>,
): Promise<Figures> {
  return figures(await sample(sessions, turns, turn));
}

/** An agent whose sessions already hold a full window. */
export async function warmAgent(options: SteadyOptions, sessions: number): Promise<SteadyAgent> {
  const agent = await steadyAgent(options);
  await Promise.all(
    Array.from({ length: sessions }, async (_, s) => {
      for (let i = 0; i < WARM_UP_TURNS; i++) {
        await agent.agent.handleMessage({ sessionId: `s${s}`, content: `warm-up ${i}` });
      }
    }),
  );
  // Steady state is what a running server is in: the code optimised (V8 tiers a function up
  // after some thousand calls), not the first turns after start-up.
  for (let i = 0; i < JIT_WARM_UP_TURNS; i++) {
    await agent.agent.handleMessage({ sessionId: 'jit-warm-up', content: `warm-up ${i}` });
  }
  return agent;
}

let questions = 0;
/** One agent turn; throws unless the turn replied. */
export async function agentTurn(agent: SteadyAgent, session: number): Promise<void> {
  const settled = await agent.agent.handleMessage({
    sessionId: `s${session}`,
    content: `question ${++questions}: what does the lookup say?`,
  });
  if (settled.settled !== 'turn' || settled.outcome !== 'replied') {
    throw new Error(`the steady turn did not reply: ${JSON.stringify(settled)}`);
  }
}

/** The bare loop's sessions: a provider and one message array per session. */
export function bareSessions(sessions: number) {
  const provider = new ZeroLatencyProvider();
  const histories: ModelMessage[][] = Array.from({ length: sessions }, () => [
    { role: 'system', content: 'You are a helpful assistant.' },
  ]);
  return (session: number, i: number) => bareTurn(provider, histories[session], `question ${i}`);
}

type Row = 'bare' | 'stored' | 'host';
const ROWS: { row: Row; label: string; options?: SteadyOptions }[] = [
  { row: 'bare', label: 'bare loop (same model and tool calls)' },
  { row: 'stored', label: 'this project, history with stored token counts', options: {} },
  {
    row: 'host',
    label: 'this project, a host store (fresh objects, no stored counts)',
    options: { hostStore: true },
  },
];

/**
 * One repetition of every row. One session: the rows take turns in blocks of `BLOCK` turns (both
 * agents built and warm first), so a slower or faster spell of the machine falls on all of
 * them alike; 64 sessions at once: one row after the other.
 */
async function repetition(): Promise<
  Record<Row, { one: Figures; many: Figures }> & { hostRead: number }
> {
  const agents: Partial<Record<Row, SteadyAgent>> = {};
  try {
    for (const { row, options } of ROWS) {
      if (options) agents[row] = await warmAgent(options, CONCURRENT);
    }
    const turnOf = (row: Row, sessions: number) => {
      const agent = agents[row];
      return agent ? (s: number) => agentTurn(agent, s) : bareSessions(sessions);
    };
    const oneSession = ROWS.map(({ row }) => ({
      row,
      turn: turnOf(row, 1),
      times: [] as number[],
      seconds: 0,
    }));
    for (let block = 0; block < TURNS / BLOCK; block++) {
      for (const entry of oneSession) {
        const { times, seconds } = await sample(1, BLOCK, entry.turn);
        entry.times.push(...times);
        entry.seconds += seconds;
      }
    }
    const out = {} as Record<Row, { one: Figures; many: Figures }> & { hostRead: number };
    out.hostRead = await hostReadCost(agents.host!);
    for (const { row, times, seconds } of oneSession) {
      out[row] = {
        one: figures({ times, seconds }),
        many: await measure(CONCURRENT, CONCURRENT_TURNS, turnOf(row, CONCURRENT)),
      };
    }
    return out;
  } finally {
    for (const agent of Object.values(agents)) await agent.close();
  }
}

/**
 * µs per extra hook call and per extra chunk: turns with more of them against without, the three
 * agents taking turns in blocks as the rows do.
 */
async function marginalCosts(): Promise<{ hook: number; chunk: number }> {
  const variants: SteadyOptions[] = [{}, { extraHooks: EXTRA_HOOKS }, { chunks: EXTRA_CHUNKS + 8 }];
  const agents: SteadyAgent[] = [];
  try {
    for (const options of variants) agents.push(await warmAgent(options, 1));
    const times: number[][] = agents.map(() => []);
    for (let block = 0; block < TURNS / BLOCK; block++) {
      for (const [i, agent] of agents.entries()) {
        times[i].push(...(await sample(1, BLOCK, (s) => agentTurn(agent, s))).times);
      }
    }
    const [base, hooks, chunks] = times.map((t) => percentile(t, 50));
    // agent:llm:before runs once per model call: twice per steady turn.
    return { hook: (hooks - base) / (EXTRA_HOOKS * 2), chunk: (chunks - base) / EXTRA_CHUNKS };
  } finally {
    for (const agent of agents) await agent.close();
  }
}

/**
 * µs the host store's own read takes (its `history()` of a session's window, timed alone): part
 * of every turn of the host-store row, the store's work rather than the agent's.
 */
async function hostReadCost(agent: SteadyAgent): Promise<number> {
  const read = () => agent.history.history('s0', { limit: HISTORY_LIMIT });
  for (let i = 0; i < 500; i++) await read();
  const reads = 2000;
  const started = performance.now();
  for (let i = 0; i < reads; i++) await read();
  return ((performance.now() - started) * 1000) / reads;
}

/** Markdown section for BENCHMARKS.md. */
export async function benchTurnCost(): Promise<string> {
  const runs: Awaited<ReturnType<typeof repetition>>[] = [];
  const marginal: { hook: number; chunk: number }[] = [];
  for (let i = 0; i < REPEATS; i++) {
    runs.push(await repetition());
    marginal.push(await marginalCosts());
  }
  const pick = (row: Row, n: 'one' | 'many', key: keyof Figures) =>
    median(runs.map((run) => run[row][n][key]));
  const bare = pick('bare', 'one', 'p50');
  const lines = ROWS.map(({ row, label }) => {
    const ratio = row === 'bare' ? '1x' : `${(pick(row, 'one', 'p50') / bare).toFixed(0)}x`;
    return (
      `| ${label} | ${pick(row, 'one', 'p50').toFixed(1)} | ${pick(row, 'one', 'p99').toFixed(1)} | ` +
      `${pick(row, 'one', 'turnsPerSecond').toFixed(0)} | ${pick(row, 'many', 'p50').toFixed(0)} | ` +
      `${pick(row, 'many', 'p99').toFixed(0)} | ${pick(row, 'many', 'turnsPerSecond').toFixed(0)} | ${ratio} |`
    );
  });
  return [
    `### Turn cost: the steady turn, in-process zero-latency model (median of ${REPEATS})`,
    '',
    `1 session: ${TURNS} turns per repetition; ${CONCURRENT} sessions at once: ${CONCURRENT_TURNS} turns each.`,
    '',
    `| implementation | p50 µs | p99 µs | turns/s | p50 µs (${CONCURRENT}) | p99 µs (${CONCURRENT}) | turns/s (${CONCURRENT}) | p50 vs bare |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...lines,
    '',
    `Per extra hook call: ${median(marginal.map((m) => m.hook)).toFixed(2)} µs (${EXTRA_HOOKS} more ` +
      `no-op middlewares on \`agent:llm:before\`); per extra streamed chunk: ` +
      `${median(marginal.map((m) => m.chunk)).toFixed(2)} µs (${EXTRA_CHUNKS} more chunks per answer).`,
    '',
    `The host store's own read (its \`history()\` of the ${HISTORY_LIMIT}-message window, fresh ` +
      `objects, timed alone): ${median(runs.map((run) => run.hostRead)).toFixed(1)} µs, part of ` +
      `each turn of its row.`,
  ].join('\n');
}
