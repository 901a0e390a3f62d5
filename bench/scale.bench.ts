/**
 * Scale benchmark, two measurements, each in a fresh child process (`bench/scale-child.ts`, run
 * with `--expose-gc`) so the parent's heap does not count:
 *
 * 1. Memory of 10,000 sessions of one steady turn each (`steadyAgent()`, 64 turns at a time):
 *    heap and RSS after forced GCs, against the same process after 3,000 warm-up turns.
 * 2. Event-loop delay (`monitorEventLoopDelay`, 1 ms resolution) while 32 sessions stream
 *    turns in a loop from a model that waits 2 ms before each chunk, alone (baseline) and
 *    during a turn of a new session whose whole ~100,000-token history comes from a host store
 *    (fresh objects, no stored counts: nothing is cached), three such turns per child. The same
 *    big turns are then run with nothing else going on.
 *
 * Run: node -r @swc-node/register -e "require('./bench/scale.bench.ts').benchScale().then(console.log)"
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import {
  AT_ONCE,
  BACKGROUND,
  BASELINE_MS,
  BIG_HISTORY_TOKENS,
  BIG_MESSAGE_CHARS,
  BIG_TURNS,
  CHUNK_DELAY_MS,
  SESSIONS,
  WARM_UP_TURNS,
} from './scale-child';
import { median } from './support/stats';

const RUNS = 3;
const CHILD = join(__dirname, 'scale-child.ts');

interface Usage {
  heapUsed: number;
  rss: number;
  /** The RSS sampled right after the collection, before the freed pages went back. */
  rssAtGc: number;
}

interface SessionsResult {
  before: Usage;
  after: Usage;
  turnsMs: number;
}

interface Window {
  p50: number;
  p99: number;
  max: number;
  samples: number;
  durationMs: number;
  utilisation: number;
  backgroundTurnsPerSecond: number;
}

interface BigTurn extends Window {
  history: { messages: number; tokens: number; chars: number };
  sent: { historyMessages: number; untrimmedHistory: number };
}

interface DelayResult {
  baseline: Window;
  big: BigTurn[];
  alone: BigTurn[];
}

/** Runs `scale-child.ts <mode>` in a fresh process; resolves with the JSON line it prints. */
function child<T>(mode: 'sessions' | 'delay'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const proc = spawn(process.execPath, ['--expose-gc', '-r', '@swc-node/register', CHILD, mode], {
      cwd: join(__dirname, '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    proc.once('error', reject);
    proc.once('close', (code) => {
      const line = stdout
        .split('\n')
        .reverse()
        .find((l) => l.startsWith('{'));
      if (code !== 0 || !line) {
        reject(new Error(`scale-child ${mode} exited ${code}: ${stderr || stdout}`));
        return;
      }
      resolve(JSON.parse(line) as T);
    });
  });
}

const MB = 1024 * 1024;
const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;
const bytes = (n: number) => `${Math.round(n).toLocaleString('en-US')} B`;
const msf = (n: number) => `${n.toFixed(1)} ms`;
const list = (values: number[], format: (n: number) => string) => values.map(format).join(' / ');
const count = (n: number) => n.toLocaleString('en-US');
const range = (values: number[]) => `${count(Math.min(...values))}–${count(Math.max(...values))}`;

async function memorySection(): Promise<string> {
  const runs: SessionsResult[] = [];
  for (let run = 0; run < RUNS; run++) runs.push(await child<SessionsResult>('sessions'));
  const heap = runs.map((r) => r.after.heapUsed - r.before.heapUsed);
  const rss = runs.map((r) => r.after.rss - r.before.rss);
  const rssAtGc = runs.map((r) => r.after.rssAtGc - r.before.rssAtGc);
  const row = (name: string, values: number[], format: (n: number) => string) =>
    `| ${name} | ${format(median(values))} | ${list(values, format)} |`;
  const perSession = (values: number[]) => values.map((v) => v / SESSIONS);
  const before = { heap: runs.map((r) => r.before.heapUsed), rss: runs.map((r) => r.before.rss) };
  const after = { heap: runs.map((r) => r.after.heapUsed), rss: runs.map((r) => r.after.rss) };
  const pairs = (from: number[], to: number[]) =>
    from.map((v, i) => `${mb(v)} → ${mb(to[i])}`).join(' / ');
  return [
    `### Scale: memory of ${SESSIONS.toLocaleString('en-US')} sessions, one steady turn each (median of ${RUNS} child processes)`,
    '',
    `Each run is a fresh process (\`--expose-gc\`): \`steadyAgent()\`, ${WARM_UP_TURNS.toLocaleString('en-US')} warm-up turns in a`,
    'throwaway session (the code optimised, the young generation grown: costs paid once, not per',
    'session), that session deleted from the log and the inbox, forced GCs and one that also',
    "returns pooled free pages (`gc({ flavor: 'last-resort' })`, what V8's memory reducer does in",
    'an idle process), RSS sampled every 25 ms until two samples agree (V8 hands the freed pages',
    'back from a background thread, up to 16 MB of them some milliseconds after the collection),',
    'then the baseline (`process.memoryUsage()`); then one turn',
    `in each of ${SESSIONS.toLocaleString('en-US')} new sessions, ${AT_ONCE} at a time, the same GCs, and the figures`,
    'again. The deltas are what the sessions keep (their history, settings and bookkeeping),',
    'against the same process before them. Target: 10,000 idle sessions under 40 MB of RSS',
    '(delta). 1 MB = 2^20 bytes.',
    '',
    '| figure | median | runs |',
    '|---|---:|---:|',
    row(`heapUsed delta, ${SESSIONS.toLocaleString('en-US')} sessions`, heap, mb),
    row(`RSS delta, ${SESSIONS.toLocaleString('en-US')} sessions`, rss, mb),
    row('RSS delta sampled right after the collection (earlier runs)', rssAtGc, mb),
    row('heapUsed per session', perSession(heap), bytes),
    row('RSS per session', perSession(rss), bytes),
    `| heapUsed before → after | ${mb(median(before.heap))} → ${mb(median(after.heap))} | ${pairs(before.heap, after.heap)} |`,
    `| RSS before → after | ${mb(median(before.rss))} → ${mb(median(after.rss))} | ${pairs(before.rss, after.rss)} |`,
    row(
      `time of the ${SESSIONS.toLocaleString('en-US')} turns`,
      runs.map((r) => r.turnsMs),
      msf,
    ),
  ].join('\n');
}

async function delaySection(): Promise<string> {
  const runs: DelayResult[] = [];
  for (let run = 0; run < RUNS; run++) runs.push(await child<DelayResult>('delay'));
  const baselines = runs.map((r) => r.baseline);
  const big = runs.flatMap((r) => r.big);
  const alone = runs.flatMap((r) => r.alone);
  const base = {
    p50: median(baselines.map((w) => w.p50)),
    p99: median(baselines.map((w) => w.p99)),
    max: median(baselines.map((w) => w.max)),
  };
  const row = (name: string, windows: Window[], turn: boolean) => {
    const at = (pick: (w: Window) => number) => median(windows.map(pick));
    const p99 = at((w) => w.p99);
    return [
      name,
      msf(at((w) => w.p50)),
      msf(p99),
      `${(p99 / base.p99).toFixed(2)}x`,
      msf(at((w) => w.max)),
      msf(Math.max(...windows.map((w) => w.max))),
      String(at((w) => w.samples)),
      `${(at((w) => w.utilisation) * 100).toFixed(0)} %`,
      at((w) => w.backgroundTurnsPerSecond).toFixed(0),
      turn ? msf(at((w) => w.durationMs)) : '',
    ]
      .join(' | ')
      .replace(/^/, '| ')
      .concat(' |');
  };
  const tokens = big.map((w) => w.history.tokens);
  const sent = big.map((w) => w.sent.untrimmedHistory);
  const messages = big[0].history.messages;
  return [
    `### Scale: event-loop delay during a 100k-token uncached turn while ${BACKGROUND} sessions stream (median of ${RUNS} child processes)`,
    '',
    'Each run is a fresh process: one agent (the steady turn of `bench/support`, history from a',
    '`HostHistoryStore`: fresh objects, no stored token counts) whose model waits',
    `${CHUNK_DELAY_MS} ms before each chunk. ${BACKGROUND} sessions run turns in a loop, each awaited before the next.`,
    `A big session is given, through the archive, ${messages} ordinary user/assistant messages of`,
    `${count(BIG_MESSAGE_CHARS)} characters (under the 20,000-character worker threshold) of varied English-like`,
    `text naming the session in every message: at least ${count(BIG_HISTORY_TOKENS)} tokens (o200k_base, texts`,
    `only: ${range(tokens)}), with a session \`historyLimit\` of 0 and \`trimming.historyShare\` 1, so`,
    'the whole history is sent (checked on its `token:usage`: untrimmed history',
    `${range(sent)} tokens, not trimmed). After a 1 s warm-up and one unmeasured big turn:`,
    `(a) ${BASELINE_MS / 1000} s of the background sessions alone; (b) ${BIG_TURNS} big turns, each a new session, the`,
    'histogram running from its `handleMessage` to its settlement (enabled 3 ms before: its',
    'first tick only starts its clock); (c) the same big turns after the background sessions',
    'stopped. `monitorEventLoopDelay({ resolution: 1 })`, in ms: the gap between ticks, so an idle',
    `loop shows about 1.1 ms. (b) and (c) are medians over the ${big.length} turns of all runs; a turn`,
    'spans only a few dozen ticks, so its p99 is its max. Loop busy:',
    '`performance.eventLoopUtilization()` over the window. Background turns/s: turns the',
    `${BACKGROUND} sessions finished per second in it (a closed loop: a busier event loop runs fewer).`,
    'Target: p99 under 20 ms during the 100k-token turn.',
    '',
    '| window | p50 | p99 | p99 vs (a) | max | worst max | ticks | loop busy | background turns/s | big turn |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row(`(a) ${BACKGROUND} sessions streaming (baseline)`, baselines, false),
    row(`(b) 100k-token turn, ${BACKGROUND} sessions streaming`, big, true),
    row('(c) 100k-token turn alone', alone, true),
    '',
    `Runs, p99 of (a): ${list(
      baselines.map((w) => w.p99),
      msf,
    )}; p99 of (b): ${list(
      big.map((w) => w.p99),
      msf,
    )}; big turn of (b): ${list(
      big.map((w) => w.durationMs),
      msf,
    )}.`,
  ].join('\n');
}

/** Runs the benchmark; returns its markdown section. */
export async function benchScale(): Promise<string> {
  const command =
    'node -r @swc-node/register -e "require(\'./bench/scale.bench.ts\').benchScale().then(console.log)"';
  return `${await memorySection()}\n\n${await delaySection()}\n\nReproduce both: \`${command}\``;
}
