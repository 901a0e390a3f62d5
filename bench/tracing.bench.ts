/**
 * Tracing overhead (issue 18): the steady turn of `bench/support/zero-latency.ts` (one session,
 * zero-latency streaming model, a 50-message window, one tool call: 5 spans per turn) with
 * the tracing layer removed, with the layer and no OpenTelemetry SDK registered (what every host
 * without tracing runs), and with the SDK registered (`NodeTracerProvider`, AsyncLocalStorage
 * context, `SimpleSpanProcessor` into an `InMemorySpanExporter`), against a bare loop making
 * the same model and tool calls. The rows take turns in blocks of `BLOCK` turns; the SDK is
 * registered only during its row's blocks. Medians of `REPEATS`.
 *
 * Run: node -r @swc-node/register -e "require('./bench/tracing.bench.ts').benchTracing().then(console.log)"
 */
import { context, propagation, trace } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { AgentTracing } from '../src/agent/tracing';
import type { SteadyAgent } from './support/zero-latency';
import { median, percentile } from './support/stats';
import { agentTurn, bareSessions, sample, warmAgent } from './turn-cost.bench';

const REPEATS = Number(process.env.REPEATS ?? 5);
const TURNS = 400;
const BLOCK = 50;

type Row = 'bare' | 'noLayer' | 'noSdk' | 'sdkBasic' | 'sdk';
const ROWS: { row: Row; label: string }[] = [
  { row: 'bare', label: 'bare loop (same model and tool calls)' },
  { row: 'noLayer', label: 'agent, tracing layer removed' },
  { row: 'noSdk', label: 'agent, tracing layer, no SDK registered (the default)' },
  {
    row: 'sdkBasic',
    label: 'agent, SDK tracer provider without a context manager (in-memory exporter)',
  },
  {
    row: 'sdk',
    label: 'agent, SDK registered as a host does: AsyncLocalStorage context (in-memory exporter)',
  },
];

interface Repetition {
  p50: Record<Row, number>;
  spansPerTurn: number;
}

async function repetition(): Promise<Repetition> {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const agents: Partial<Record<Row, SteadyAgent>> = {};
  try {
    for (const row of ['noLayer', 'noSdk', 'sdkBasic', 'sdk'] as const) {
      agents[row] = await warmAgent({}, 1);
    }
    agents.noLayer!.app.get(AgentTracing).onModuleDestroy();
    const bare = bareSessions(1);
    const times: Record<Row, number[]> = {
      bare: [],
      noLayer: [],
      noSdk: [],
      sdkBasic: [],
      sdk: [],
    };
    let spans = 0;
    for (let block = 0; block < TURNS / BLOCK; block++) {
      for (const { row } of ROWS) {
        const agent = agents[row];
        if (row === 'sdk') provider.register();
        // The provider alone: spans, but no context manager (no async hooks).
        if (row === 'sdkBasic') trace.setGlobalTracerProvider(provider);
        const turn = agent ? (s: number) => agentTurn(agent, s) : bare;
        times[row].push(...(await sample(1, BLOCK, turn)).times);
        if (row === 'sdk' || row === 'sdkBasic') {
          if (row === 'sdk') spans += exporter.getFinishedSpans().length;
          exporter.reset();
          trace.disable();
          context.disable();
          propagation.disable();
        }
      }
    }
    const p50 = {} as Record<Row, number>;
    for (const { row } of ROWS) p50[row] = percentile(times[row], 50);
    return { p50, spansPerTurn: spans / TURNS };
  } finally {
    for (const agent of Object.values(agents)) await agent.close();
    await provider.shutdown();
  }
}

/** Markdown section for BENCHMARKS.md. */
export async function benchTracing(): Promise<string> {
  const runs: Repetition[] = [];
  for (let i = 0; i < REPEATS; i++) runs.push(await repetition());
  const p50 = (row: Row) => median(runs.map((r) => r.p50[row]));
  const lines = ROWS.map(({ row, label }) => {
    const vsBare = `${(p50(row) / p50('bare')).toFixed(1)}x`;
    const vsNoLayer = row === 'bare' ? '' : `${(p50(row) / p50('noLayer')).toFixed(3)}x`;
    return `| ${label} | ${p50(row).toFixed(1)} | ${vsNoLayer} | ${vsBare} |`;
  });
  const hooks = p50('sdk') - p50('sdkBasic');
  return [
    `### Tracing overhead: the steady turn, one session (median of ${REPEATS})`,
    '',
    `${TURNS} turns per row and repetition, in blocks of ${BLOCK} taking turns; ` +
      `${median(runs.map((r) => r.spansPerTurn)).toFixed(1)} spans per traced turn.`,
    '',
    '| implementation | p50 µs per turn | vs tracing layer removed | vs bare loop |',
    '|---|---:|---:|---:|',
    ...lines,
    '',
    `Of the SDK's cost, ${hooks.toFixed(0)} µs per turn is its AsyncLocalStorage context ` +
      'manager: on Node 20 it turns on async hooks, which every promise of the process pays for ' +
      "(the agent's spans are parented explicitly and do not need it).",
  ].join('\n');
}
