/**
 * Token-accounting benchmark: what the usage estimate of a 20-call tool loop costs, relative to
 * one raw count of the whole prompt with the estimator's own tokenizer (gpt-tokenizer), with and
 * without the per-message cache; one raw tiktoken encode beside it for reference.
 *
 * Run: node -r @swc-node/register -e "require('./bench/usage.bench.ts').benchUsage().then(console.log)"
 */
import { countTokens } from 'gpt-tokenizer/cjs/encoding/o200k_base';
import { get_encoding } from 'tiktoken';
import type { ModelMessage, ToolDefinition } from '../src/contracts';
import { TokenEstimator, UsageTracker, type UsageEventInput } from '../src/usage';

const RUNS = 9;
const HISTORY_MESSAGES = 200;
const TOOL_CALLS = 20;
const WORDS = (
  'the a of cluster replication lag index query plan vacuum shard we should check migrate ' +
  'rollback deploy latency p99 timeout retry backoff queue worker 42 2026 config yaml json ' +
  'Zeitung naïve café 数据 迁移 não über quickly slowly because therefore however'
).split(' ');

/** Deterministic pseudo-random generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Deterministic prose of `words` words. */
function prose(next: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    out.push(WORDS[Math.floor(next() * WORDS.length)] + (next() < 0.08 ? '.' : ''));
  }
  return out.join(' ');
}

/** A system block, then 200 alternating user/assistant messages of about 60k tokens in all. */
function buildHistory(): ModelMessage[] {
  const next = rng(20261129);
  const list: ModelMessage[] = [
    {
      role: 'system',
      content: prose(next, 400),
      metadata: { bucket: 'persona', injector: 'Core/persona' },
    },
  ];
  for (let i = 0; i < HISTORY_MESSAGES; i++) {
    list.push({ role: i % 2 ? 'assistant' : 'user', content: prose(next, 232) });
  }
  return list;
}

/** Precomputed texts of the tool loop, so the measured part only builds message objects. */
function buildLoopTexts(): Array<{ args: string; result: string }> {
  const next = rng(7);
  return Array.from({ length: TOOL_CALLS }, () => ({
    args: JSON.stringify({ q: prose(next, 12) }),
    result: JSON.stringify({ rows: prose(next, 120) }),
  }));
}

const TOOLS: ToolDefinition[] = [
  {
    name: 'sql',
    description: 'Run a read-only SQL query against the cluster',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
  },
  {
    name: 'shell',
    description: 'Run a shell command on the bastion host',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  },
];

/** Median milliseconds of `RUNS` runs of `fn` after one warm-up. */
function median(fn: () => void): number {
  fn();
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = process.hrtime.bigint();
    fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

/** One tool loop: each call appends a tool-call message and its result, then builds the event. */
function toolLoop(
  tracker: UsageTracker,
  history: ModelMessage[],
  loop: Array<{ args: string; result: string }>,
  beforeEach: () => void,
): void {
  const list = [...history];
  const base: Omit<UsageEventInput, 'messages'> = {
    sessionId: 'bench',
    turnId: 't',
    tools: TOOLS,
    encoding: 'o200k_base',
    contextWindow: 128_000,
    maxTokens: 4096,
    tokenBudget: 123_392,
    trimmed: false,
    historyMessages: history.length,
    historyLimit: 0,
  };
  loop.forEach(({ args, result }, i) => {
    const id = `call_${i}`;
    list.push(
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id, type: 'function', function: { name: 'sql', arguments: args } }],
      },
      { role: 'tool', content: result, toolCallId: id },
    );
    beforeEach();
    tracker.buildEvent({ ...base, messages: list });
  });
}

/** Runs the benchmark and returns markdown lines with the figures. */
export async function benchUsage(): Promise<string> {
  const history = buildHistory();
  const loop = buildLoopTexts();
  const promptText = history.map((m) => m.content).join('\n');
  const encoder = get_encoding('o200k_base');
  const estimator = new TokenEstimator();
  const tracker = new UsageTracker(estimator);
  try {
    const promptTokens = encoder.encode_ordinary(promptText).length;
    const ordinary = { disallowedSpecial: new Set<string>() };
    const raw = median(() => countTokens(promptText, ordinary));
    const rawTiktoken = median(() => encoder.encode_ordinary(promptText));
    // (b) cache on; the history starts cold in every run (as freshly loaded objects would).
    const cached = median(() => {
      estimator.clearCache();
      toolLoop(tracker, history, loop, () => undefined);
    });
    // (c) no cache: every call recounts the whole list (a fresh estimator, encoders reused).
    const uncached = median(() => toolLoop(tracker, history, loop, () => estimator.clearCache()));
    // (d) history loaded with persisted metadata.tokenCount: nothing of it is encoded again.
    const persisted = history.map((m) => ({
      ...m,
      metadata: { ...m.metadata, tokenCount: estimator.persistableCount(m, 'o200k_base') },
    }));
    const loaded = median(() => {
      estimator.clearCache();
      toolLoop(tracker, persisted, loop, () => undefined);
    });
    const fmt = (ms: number): string => ms.toFixed(2);
    return [
      `### Token accounting (${history.length} messages, ${promptTokens} prompt tokens, ${TOOL_CALLS}-call tool loop, median of ${RUNS})`,
      '',
      '| measurement | ms | ratio to (a) |',
      '|---|---:|---:|',
      `| (a) one raw count of the whole prompt (gpt-tokenizer, the estimator's encoder) | ${fmt(raw)} | 1.00 |`,
      `| one raw tiktoken encode of the whole prompt, for reference | ${fmt(rawTiktoken)} | ${(rawTiktoken / raw).toFixed(2)} |`,
      `| (b) ${TOOL_CALLS} buildEvent calls, cache on (history cold) | ${fmt(cached)} | ${(cached / raw).toFixed(2)} |`,
      `| (c) ${TOOL_CALLS} buildEvent calls, no cache | ${fmt(uncached)} | ${(uncached / raw).toFixed(2)} |`,
      `| (d) ${TOOL_CALLS} buildEvent calls, history with persisted tokenCount | ${fmt(loaded)} | ${(loaded / raw).toFixed(2)} |`,
      '',
      `(b)/(a) = ${(cached / raw).toFixed(2)} (target < 1.5); (c)/(a) = ${(uncached / raw).toFixed(2)}`,
    ].join('\n');
  } finally {
    encoder.free();
    await estimator.dispose();
  }
}
