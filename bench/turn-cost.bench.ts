/**
 * Turn-cost benchmark (issue 15): the steady turn of `bench/support/zero-latency.ts` (a
 * zero-latency streaming model in this process, a 50-message window, one tool call, five no-op
 * hooks, one prompt contribution, in-memory stores), with the history's stored token counts and
 * through a host's own store that returns fresh objects without them, against a bare loop that
 * makes the same model and tool calls, all in this process. Per-turn p50/p99 and turns/s for 1
 * session and for 64 sessions at once; per extra hook call and per extra streamed chunk.
 * Implementations interleave within each repetition; medians of `REPEATS`.
 *
 * Run: node -r @swc-node/register -e "require('./bench/turn-cost.bench.ts').benchTurnCost().then(console.log)"
 */
import type { ModelMessage } from '../src';
import {
  bareTurn,
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

/** Runs `turn(session, i)` for `sessions` sessions at once, `turns` each; per-turn µs. */
async function measure(
  sessions: number,
  turns: number,
  turn: (session: number, i: number) => Promise<void>,
): Promise<Figures> {
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
  const seconds = (performance.now() - started) / 1000;
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    turnsPerSecond: times.length / seconds,
  };
}

/** An agent whose sessions already hold a full window. */
async function warmAgent(options: SteadyOptions, sessions: number): Promise<SteadyAgent> {
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
async function agentTurn(agent: SteadyAgent, session: number): Promise<void> {
  const settled = await agent.agent.handleMessage({
    sessionId: `s${session}`,
    content: `question ${++questions}: what does the lookup say?`,
  });
  if (settled.settled !== 'turn' || settled.outcome !== 'replied') {
    throw new Error(`the steady turn did not reply: ${JSON.stringify(settled)}`);
  }
}

/** The bare loop's sessions: a provider and one message array per session. */
function bareSessions(sessions: number) {
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

/** One repetition of every row, 1 session and 64 sessions. */
async function repetition(): Promise<Record<Row, { one: Figures; many: Figures }>> {
  const out = {} as Record<Row, { one: Figures; many: Figures }>;
  for (const { row, options } of ROWS) {
    if (!options) {
      out[row] = {
        one: await measure(1, TURNS, bareSessions(1)),
        many: await measure(CONCURRENT, CONCURRENT_TURNS, bareSessions(CONCURRENT)),
      };
      continue;
    }
    const agent = await warmAgent(options, CONCURRENT);
    try {
      out[row] = {
        one: await measure(1, TURNS, (s) => agentTurn(agent, s)),
        many: await measure(CONCURRENT, CONCURRENT_TURNS, (s) => agentTurn(agent, s)),
      };
    } finally {
      await agent.close();
    }
  }
  return out;
}

/** Per-turn p50 in µs of a one-session agent built with `options`. */
async function p50Of(options: SteadyOptions): Promise<number> {
  const agent = await warmAgent(options, 1);
  try {
    return (await measure(1, TURNS, (s) => agentTurn(agent, s))).p50;
  } finally {
    await agent.close();
  }
}

/** µs per extra hook call and per extra chunk: turns with more of them against without. */
async function marginalCosts(): Promise<{ hook: number; chunk: number }> {
  const base = await p50Of({});
  const hooks = await p50Of({ extraHooks: EXTRA_HOOKS });
  const chunks = await p50Of({ chunks: EXTRA_CHUNKS + 8 });
  // agent:llm:before runs once per model call: twice per steady turn.
  return { hook: (hooks - base) / (EXTRA_HOOKS * 2), chunk: (chunks - base) / EXTRA_CHUNKS };
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
  ].join('\n');
}
