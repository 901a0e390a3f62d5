/**
 * Distributed-mode benchmark (issue 17), on the local Redis and PostgreSQL (skipped, with the
 * reason printed, when either is not reachable). Measured in one run:
 *
 * 1. Throughput, with 1, 2 and 4 instances as separate Node processes (`distributed-child.ts`:
 *    each an application with `distribution` on one Redis prefix and one PostgreSQL schema, the
 *    zero-latency model of `bench/support`), each instance's callers in a closed loop on its own
 *    instance: cold (each input to an idle session, sessions taken in turn: an idle-to-busy
 *    transition per input) and warm (two sourced inputs on their way per session, so it stays
 *    held and each input reaches the holder through the pending list and a poke). Baseline in
 *    the same run: raw BullMQ no-op jobs, the same number of processes, the same worker
 *    concurrency and callers (each adds a job with the wake job's options and waits for its
 *    completion through `QueueEvents`). Runs alternate; medians of `REPEATS`. Before the agents
 *    start, where the ceiling is: raw no-op jobs against raw jobs that each write an input's
 *    minimal durable record to PostgreSQL (`minimalRecord` in `distributed-child.ts`) and
 *    against the agent on the in-memory stores, alternating.
 * 2. Wake-job adds per idle-to-busy transition: BullMQ's job id counter of the wake queue (every
 *    add, deduplicated ones too) against the lease grants (the sum of the sessions' fence
 *    counters), over the cold and the warm runs.
 * 3. Added latency per input, distributed minus in-process, cold (an idle session taken by the
 *    instance its input came to, and through a wake job) and warm (`distributed-latency.ts`).
 * 4. Warm added latency again with each instance in its own process (`warm-procs.ts`).
 * 5. Round trips per input: PostgreSQL queries and Redis commands, by kind
 *    (`distributed-round-trips.ts`).
 *
 * Run: node -r @swc-node/register -e "require('./bench/distributed.bench.ts').benchDistributed().then(console.log)"
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { Queue } from 'bullmq';
import type Redis from 'ioredis';
import { createSqlStores } from '../src';
import { pgReachable, PG_URL, tempPgSchema } from '../test/contracts/sql-test-db';
import {
  deletePrefix,
  redisReachable,
  REDIS_URL,
  testPrefix,
  testRedis,
} from '../test/support/redis-test';
import type { ChildSetting, RunCommand, RunResult } from './distributed-child';
import { COLD_SESSIONS_PER_CALLER, WARM_IN_FLIGHT } from './distributed-child';
import { added, coldLatency, warmLatency } from './distributed-latency';
import { directSweepSection } from './direct-sweep';
import { roundTripsSection } from './distributed-round-trips';
import { warmAcrossProcesses } from './warm-procs';
import { median, percentile } from './support/stats';

const REPEATS = Number(process.env.REPEATS ?? 3);
const INSTANCES = (process.env.INSTANCES ?? '1,2,4').split(',').map(Number);
/** The wake worker's concurrency of each instance (and the raw worker's). */
const CONCURRENCY = 16;
/** Callers per instance, each in a closed loop. */
const CALLERS = 16;
const WARM_UP_MS = 1_000;
const WINDOW_MS = 2_000;
const LATENCY_BLOCKS = 8;
const LATENCY_BLOCK = 25;
const LATENCY_WARM_UP = 100;
const CHILD = join(__dirname, 'distributed-child.ts');
/** A throughput run's command, less its kind and tag. */
const RUN = { cmd: 'run', callers: CALLERS, warmUpMs: WARM_UP_MS, ms: WINDOW_MS } as const;
const COMMAND =
  'node -r @swc-node/register -e "require(\'./bench/distributed.bench.ts\').benchDistributed().then(console.log)"';

/** A progress line on stderr (the markdown goes to stdout). */
function progress(what: string): void {
  process.stderr.write(`[distributed bench ${new Date().toISOString().slice(11, 19)}] ${what}\n`);
}

/** A child process and its answers, one JSON line each. */
class Child {
  private readonly lines: Interface;
  private readonly answers: unknown[] = [];
  /** The caller waiting for the next answer, if any. */
  private waiting?: { resolve: (value: unknown) => void; reject: (error: Error) => void };
  private stderr = '';
  /** Set once the process has exited: later answers fail at once instead of never coming. */
  private exited?: Error;

  private constructor(private readonly proc: ChildProcess) {
    this.lines = createInterface({ input: proc.stdout! });
    this.lines.on('line', (line) => {
      if (!line.startsWith('{')) return;
      const value = JSON.parse(line) as unknown;
      if (this.waiting) {
        const { resolve } = this.waiting;
        this.waiting = undefined;
        resolve(value);
      } else this.answers.push(value);
    });
    proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    proc.once('exit', (code) => {
      this.exited = new Error(`a bench child exited ${code}: ${this.stderr.slice(-2000)}`);
      this.waiting?.reject(this.exited);
      this.waiting = undefined;
    });
  }

  static async start(
    mode: 'agent' | 'local' | 'memory' | 'bullmq' | 'durable',
    setting: ChildSetting,
  ): Promise<Child> {
    const proc = spawn(
      process.execPath,
      ['-r', '@swc-node/register', CHILD, mode, JSON.stringify(setting)],
      { cwd: join(__dirname, '..'), stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const child = new Child(proc);
    await child.answer();
    return child;
  }

  /** The next answer; rejects when the process exits first. */
  answer<T>(): Promise<T> {
    const ready = this.answers.shift();
    if (ready !== undefined) return Promise.resolve(ready as T);
    if (this.exited) return Promise.reject(this.exited);
    return new Promise<T>((resolve, reject) => {
      this.waiting = { resolve: resolve as (value: unknown) => void, reject };
    });
  }

  run(command: RunCommand): Promise<RunResult> {
    this.proc.stdin!.write(`${JSON.stringify(command)}\n`);
    return this.answer<RunResult>();
  }

  async close(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdin!.write('{"cmd":"close"}\n');
    await exited;
  }
}

/** Inputs (or jobs) per second of one run of every child at once. */
async function runAll(children: Child[], command: RunCommand) {
  const results = await Promise.all(children.map((child) => child.run(command)));
  const seconds = command.ms / 1000;
  return {
    perSecond: results.reduce((sum, r) => sum + r.count, 0) / seconds,
    total: results.reduce((sum, r) => sum + r.total, 0),
  };
}

/** The sum of the values of every key matching `pattern`. */
async function sumOf(redis: Redis, pattern: string): Promise<number> {
  let sum = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) for (const v of await redis.mget(...keys)) sum += Number(v ?? 0);
  } while (cursor !== '0');
  return sum;
}

/** Where the wake queue's event stream stands, wake-job adds and lease grants so far. */
async function counters(redis: Redis, prefix: string) {
  const [last] = await redis.xrevrange(`${prefix}:wake:events`, '+', '-', 'COUNT', 1);
  return {
    at: last?.[0] ?? '0-0',
    adds: Number((await redis.get(`${prefix}:wake:id`)) ?? 0),
    grants: await sumOf(redis, `${prefix}:fence:*`),
  };
}

/**
 * Wake jobs added and adds deduplicated (joined to a job already there) between two counters,
 * from the queue's event stream (checked not trimmed meanwhile; a count that differs from the
 * id counter's is reported on stderr).
 */
async function jobsBetween(
  redis: Redis,
  prefix: string,
  from: { at: string; adds: number },
  to: { at: string; adds: number },
): Promise<{ jobs: number; deduplicated: number }> {
  const key = `${prefix}:wake:events`;
  const [first] = await redis.xrange(key, '-', '+', 'COUNT', 1);
  if (first && from.at !== '0-0' && first[0] > from.at) {
    throw new Error("the wake queue's event stream was trimmed during a run");
  }
  const entries = await redis.xrange(key, `(${from.at}`, to.at);
  const count = (event: string) =>
    entries.filter(([, fields]) => fields[0] === 'event' && fields[1] === event).length;
  const jobs = count('added');
  const deduplicated = count('deduplicated');
  if (jobs + deduplicated !== to.adds - from.adds) {
    progress(
      `wake-job adds: ${to.adds - from.adds} by the id counter, ${jobs} + ${deduplicated} in the events`,
    );
  }
  return { jobs, deduplicated };
}

/** Waits until no session is held and no wake job waits or runs (the run's tail let go). */
async function quiet(redis: Redis, queue: Queue, prefix: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const [, leases] = await redis.scan('0', 'MATCH', `${prefix}:lease:*`, 'COUNT', 10_000);
    const jobs = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    if (leases.length === 0 && Object.values(jobs).every((n) => n === 0)) return;
    if (Date.now() > deadline)
      throw new Error(`the instances did not go idle: ${JSON.stringify(jobs)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** One row of the throughput table: medians over the repetitions. */
interface ThroughputRow {
  instances: number;
  noop: number;
  cold: number;
  warm: number;
  localCold: number;
  localWarm: number;
  coldAddsPerGrant: number;
  coldGrantsPerInput: number;
  coldDeduplicated: number;
  warmDeduplicated: number;
  warmAddsPerGrant: number;
  warmGrantsPerInput: number;
}

/**
 * Raw BullMQ jobs/s, no-op and each writing an input's minimal durable record, and the agent's
 * cold turns/s on the in-memory stores in one process.
 */
interface Ceilings {
  noop: number;
  durable: number;
  memory: number;
}

/**
 * Where the throughput ceiling is with `n` processes: raw no-op jobs, raw jobs writing
 * `minimalRecord` (`distributed-child.ts`, the durable record's floor) and the agent on the
 * in-memory stores, taking turns; medians. Processes of their own, closed before the agents
 * start: together they would need more PostgreSQL connections than the server's default 100.
 */
async function ceilings(n: number, db: string): Promise<Ceilings> {
  const prefix = testPrefix();
  const raw: Child[] = [];
  const durable: Child[] = [];
  const memory: Child[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const setting = { redis: REDIS_URL, db, instanceId: `i${i}`, concurrency: CONCURRENCY };
      raw.push(await Child.start('bullmq', { ...setting, prefix: `${prefix}-noop` }));
      durable.push(await Child.start('durable', { ...setting, prefix }));
      memory.push(await Child.start('memory', { ...setting, prefix }));
    }
    const runs: Ceilings[] = [];
    for (let r = 0; r < REPEATS; r++) {
      progress(
        `${n} process(es), repetition ${r + 1}: no-op jobs, durable-record jobs, memory agent`,
      );
      const noop = await runAll(raw, { ...RUN, kind: 'noop', tag: `f-n${n}r${r}` });
      const floor = await runAll(durable, { ...RUN, kind: 'durable', tag: `d-n${n}r${r}` });
      const agent = await runAll(memory, { ...RUN, kind: 'cold', tag: `m-n${n}r${r}` });
      runs.push({ noop: noop.perSecond, durable: floor.perSecond, memory: agent.perSecond });
    }
    return {
      noop: median(runs.map((run) => run.noop)),
      durable: median(runs.map((run) => run.durable)),
      memory: median(runs.map((run) => run.memory)),
    };
  } finally {
    for (const child of [...raw, ...durable, ...memory]) {
      await child.close().catch(() => undefined);
    }
    await deletePrefix(`${prefix}-noop`);
    await deletePrefix(prefix);
  }
}

/** Throughput with `n` instances and `n` raw BullMQ processes, alternating; medians. */
async function throughput(n: number, db: string): Promise<ThroughputRow> {
  const agentPrefix = testPrefix();
  const rawPrefix = testPrefix();
  const redis = testRedis();
  const url = new URL(REDIS_URL);
  const connection = { host: url.hostname, port: Number(url.port || 6379) };
  const queue = new Queue('wake', { connection, prefix: agentPrefix });
  const children: Child[] = [];
  const setting = (prefix: string, i: number): ChildSetting => ({
    redis: REDIS_URL,
    prefix,
    db,
    instanceId: `i${i}`,
    concurrency: CONCURRENCY,
  });
  try {
    const agents: Child[] = [];
    const raw: Child[] = [];
    const local: Child[] = [];
    for (let i = 0; i < n; i++) {
      agents.push(await Child.start('agent', setting(agentPrefix, i)));
      children.push(agents[i]);
      raw.push(await Child.start('bullmq', setting(rawPrefix, i)));
      children.push(raw[i]);
      local.push(await Child.start('local', setting(agentPrefix, i)));
      children.push(local[i]);
    }
    const runs: Omit<ThroughputRow, 'instances'>[] = [];
    for (let r = 0; r < REPEATS; r++) {
      progress(`${n} process(es), repetition ${r + 1}: raw BullMQ`);
      const noop = await runAll(raw, { ...RUN, kind: 'noop', tag: `r${r}` });
      const before = await counters(redis, agentPrefix);
      progress('cold');
      const cold = await runAll(agents, { ...RUN, kind: 'cold', tag: `n${n}r${r}` });
      await quiet(redis, queue, agentPrefix);
      const between = await counters(redis, agentPrefix);
      progress('warm');
      const warm = await runAll(agents, { ...RUN, kind: 'warm', tag: `n${n}r${r}` });
      await quiet(redis, queue, agentPrefix);
      const after = await counters(redis, agentPrefix);
      const coldJobs = await jobsBetween(redis, agentPrefix, before, between);
      const warmJobs = await jobsBetween(redis, agentPrefix, between, after);
      progress('in one process, for reference');
      const localCold = await runAll(local, { ...RUN, kind: 'cold', tag: `local-n${n}r${r}` });
      const localWarm = await runAll(local, { ...RUN, kind: 'warm', tag: `local-n${n}r${r}` });
      runs.push({
        noop: noop.perSecond,
        cold: cold.perSecond,
        warm: warm.perSecond,
        localCold: localCold.perSecond,
        localWarm: localWarm.perSecond,
        coldAddsPerGrant: coldJobs.jobs / (between.grants - before.grants),
        coldDeduplicated: coldJobs.deduplicated / (between.grants - before.grants),
        coldGrantsPerInput: (between.grants - before.grants) / cold.total,
        warmAddsPerGrant: warmJobs.jobs / Math.max(1, after.grants - between.grants),
        warmDeduplicated: warmJobs.deduplicated / Math.max(1, after.grants - between.grants),
        warmGrantsPerInput: (after.grants - between.grants) / warm.total,
      });
    }
    const pick = (key: keyof Omit<ThroughputRow, 'instances'>) => median(runs.map((r) => r[key]));
    return {
      instances: n,
      noop: pick('noop'),
      cold: pick('cold'),
      warm: pick('warm'),
      localCold: pick('localCold'),
      localWarm: pick('localWarm'),
      coldAddsPerGrant: Math.max(...runs.map((r) => r.coldAddsPerGrant)),
      coldGrantsPerInput: pick('coldGrantsPerInput'),
      coldDeduplicated: pick('coldDeduplicated'),
      warmDeduplicated: pick('warmDeduplicated'),
      warmAddsPerGrant: Math.max(...runs.map((r) => r.warmAddsPerGrant)),
      warmGrantsPerInput: pick('warmGrantsPerInput'),
    };
  } finally {
    for (const child of children) await child.close().catch(() => undefined);
    await queue.close();
    redis.disconnect();
    await deletePrefix(agentPrefix);
    await deletePrefix(rawPrefix);
  }
}

const ms = (n: number) => n.toFixed(2);
const verdict = (value: number, target: number) => (value <= target ? 'met' : 'not met');

/** The latency table: p50/p99 of each row and the added p50/p99 against in-process. */
async function latencySection(db: string): Promise<string[]> {
  const prefix = testPrefix();
  const base = { redis: REDIS_URL, prefix, concurrency: CONCURRENCY };
  try {
    const cold = await coldLatency(
      db,
      { ...base, instanceId: 'lat-a' },
      LATENCY_BLOCKS,
      LATENCY_BLOCK,
      LATENCY_WARM_UP,
    );
    // The same with every idle-to-busy transition through a wake job (`runWhereReceived: false`).
    const viaJob = await coldLatency(
      db,
      { ...base, instanceId: 'lat-j', runWhereReceived: false },
      LATENCY_BLOCKS,
      LATENCY_BLOCK,
      LATENCY_WARM_UP,
    );
    const warm = await warmLatency(
      db,
      { ...base, instanceId: 'lat-a' },
      { ...base, instanceId: 'lat-b' },
      LATENCY_BLOCKS,
      LATENCY_BLOCK,
      LATENCY_WARM_UP,
    );
    const row = (label: string, samples: number[], baseline: number[]) => {
      const add = added(baseline, samples);
      return `| ${label} | ${ms(percentile(samples, 50))} | ${ms(percentile(samples, 99))} | ${baseline === samples ? '' : ms(add.p50)} | ${baseline === samples ? '' : ms(add.p99)} |`;
    };
    const coldAdded = added(cold.inProcess, cold.distributed).p50;
    const warmAdded = added(warm.inProcess, warm.viaMailbox).p50;
    return [
      `Added latency per input (${LATENCY_BLOCKS * LATENCY_BLOCK} inputs per row in blocks of ${LATENCY_BLOCK}, the rows taking turns, after ${LATENCY_WARM_UP} warm-up inputs each), ms:`,
      '',
      '| input | p50 | p99 | added p50 | added p99 |',
      '|---|---:|---:|---:|---:|',
      row(
        'cold, in one process (baseline): `handleMessage` to settlement',
        cold.inProcess,
        cold.inProcess,
      ),
      row(
        'cold, distributed (1 instance): taken where it came (push takes the lease), fence claim',
        cold.distributed,
        cold.inProcess,
      ),
      row('cold, in one process (baseline of the next row)', viaJob.inProcess, viaJob.inProcess),
      row(
        'cold, distributed, `runWhereReceived: false`: wake job, lease, fence claim',
        viaJob.distributed,
        viaJob.inProcess,
      ),
      row('warm, in one process (baseline): way in + way back', warm.inProcess, warm.inProcess),
      row(
        'warm, distributed, sent to another instance (mailbox poke)',
        warm.viaMailbox,
        warm.inProcess,
      ),
      row('warm, distributed, sent to the holder', warm.toHolder, warm.inProcess),
      '',
      `**Cold target (at most 2 ms p50 added): ${verdict(coldAdded, 2)}** (${ms(coldAdded)} ms). ` +
        `**Warm target (at most 0.5 ms p50 added, mailbox poke): ${verdict(warmAdded, 0.5)}** (${ms(warmAdded)} ms).`,
    ];
  } finally {
    await deletePrefix(prefix);
  }
}

/** The throughput table. */
async function throughputSection(db: string): Promise<string[]> {
  const rows: ThroughputRow[] = [];
  const ceilingRows: Ceilings[] = [];
  for (const n of INSTANCES) {
    ceilingRows.push(await ceilings(n, db));
    rows.push(await throughput(n, db));
  }
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  const worst = Math.min(...rows.map((r) => r.cold / r.noop));
  const adds = Math.max(...rows.flatMap((r) => [r.coldAddsPerGrant, r.warmAddsPerGrant]));
  return [
    `Throughput, ${CALLERS} callers and worker concurrency ${CONCURRENCY} per process, ${WINDOW_MS / 1000} s after ${WARM_UP_MS / 1000} s of warm-up, median of ${REPEATS}:`,
    '',
    '| processes | raw BullMQ no-op jobs/s (ceiling) | cold turns/s | cold / raw | warm turns/s | warm / raw | in one process: cold / warm turns/s | cold / warm vs in one process |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.instances} | ${r.noop.toFixed(0)} | ${r.cold.toFixed(0)} | ${ratio(r.cold, r.noop)} | ${r.warm.toFixed(0)} | ${ratio(r.warm, r.noop)} | ${r.localCold.toFixed(0)} / ${r.localWarm.toFixed(0)} | ${ratio(r.cold, r.localCold)} / ${ratio(r.warm, r.localWarm)} |`,
    ),
    '',
    "Where the ceiling is, in processes of their own run before the agents start, the three taking turns: raw no-op jobs; the same raw jobs each writing what the issue asks to be durable for one input at the least (its inbox row at acceptance, the input and its reply in the history, the settlement: three autocommitted statements on the same schema; no reads, no agent), a floor no turn that writes its record one input at a time can beat (past it, only batching the writes of many sessions into shared statements would go); and the agent's cold turns on the in-memory stores in one process (its own work, no database):",
    '',
    '| processes | raw no-op jobs/s | raw jobs writing the minimal durable record/s | durable / no-op | agent on the in-memory stores, cold turns/s | that / no-op |',
    '|---:|---:|---:|---:|---:|---:|',
    ...ceilingRows.map(
      (f, i) =>
        `| ${INSTANCES[i]} | ${f.noop.toFixed(0)} | ${f.durable.toFixed(0)} | ${ratio(f.durable, f.noop)} | ${f.memory.toFixed(0)} | ${ratio(f.memory, f.noop)} |`,
    ),
    '',
    "BullMQ wake jobs added (the wake queue's `added` events; adds that joined a job already there, `deduplicated`, apart) against lease grants (idle-to-busy transitions: the sum of the sessions' fence counters), over whole runs:",
    '',
    '| processes | cold: jobs per grant (worst run) | cold: deduplicated adds per grant | cold: grants per input | warm: jobs per grant (worst run) | warm: deduplicated adds per grant | warm: grants per input |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.instances} | ${r.coldAddsPerGrant.toFixed(3)} | ${r.coldDeduplicated.toFixed(3)} | ${r.coldGrantsPerInput.toFixed(3)} | ${r.warmAddsPerGrant.toFixed(3)} | ${r.warmDeduplicated.toFixed(3)} | ${r.warmGrantsPerInput.toFixed(3)} |`,
    ),
    '',
    `**Throughput target (cold turns/s at least half the raw no-op jobs/s): ${verdict(0.5, worst)}** (worst ${worst.toFixed(2)}x). ` +
      `**At most one BullMQ job per idle-to-busy transition: ${verdict(adds, 1)}** (worst ${adds.toFixed(3)} jobs per grant).`,
  ];
}

/** Markdown section for BENCHMARKS.md. */
export async function benchDistributed(): Promise<string> {
  const title = '### Distributed mode (issue 17)';
  const missing = !redisReachable()
    ? `Redis not reachable at ${REDIS_URL}`
    : !pgReachable()
      ? `PostgreSQL not reachable at ${PG_URL}`
      : undefined;
  if (missing) return `${title}\n\nSkipped: ${missing}.`;
  const db = await tempPgSchema();
  try {
    await (await createSqlStores(db.url)).close();
    const latency = await latencySection(db.url);
    progress('warm latency, each instance in its own process');
    const warmProcs = await warmAcrossProcesses();
    progress('round trips per input');
    const roundTrips = await roundTripsSection();
    progress('direct-set sweep');
    const sweep = await directSweepSection();
    const throughputLines = await throughputSection(db.url);
    return [
      title,
      '',
      'The agent on PostgreSQL stores (one temporary schema) with the zero-latency model of',
      '`bench/support` (a `lookup` tool call, then the answer in 8 chunks), in one process and in',
      `distributed mode on the local Redis (a key prefix of its own, deleted after). ${COLD_SESSIONS_PER_CALLER} sessions per`,
      `caller in cold runs, ${WARM_IN_FLIGHT} sourced inputs on their way per session in warm runs.`,
      '',
      ...throughputLines,
      '',
      ...latency,
      '',
      ...warmProcs,
      '',
      ...roundTrips,
      '',
      ...sweep,
      '',
      `Reproduce: \`${COMMAND}\``,
    ].join('\n');
  } finally {
    await db.drop();
  }
}
