/**
 * One process of the distributed-mode benchmark (`distributed.bench.ts`): an instance of
 * distributed mode (`agent`: an application on the shared PostgreSQL schema and Redis prefix,
 * the zero-latency model), the same agent in one process (`local`, for reference; `memory`, on
 * the in-memory stores), or a raw BullMQ worker process (`bullmq`: a queue, a worker with a
 * no-op processor, and `QueueEvents` for the callers' completions), or the same whose processor
 * writes an input's minimal durable record to PostgreSQL (`durable`, see `minimalRecord`). Run
 * with `-r @swc-node/register`; argument 2 is the mode, argument 3 a JSON `ChildSetting`.
 *
 * It prints `{"ready":true}` once set up, then answers each command line on stdin with one JSON
 * line: `{"cmd":"run","kind":"cold"|"warm"|"noop"|"durable","callers":K,"warmUpMs":W,"ms":M}`
 * runs K callers in a closed loop (each waits for its input's settlement, or its job's completion,
 * before sending the next) and counts those completed in the M ms after a warm-up of W ms;
 * `{"cmd":"close"}` closes and exits.
 */
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import { randomUUID } from 'node:crypto';
import { Queue, QueueEvents, Worker, type Job } from 'bullmq';
import { Pool } from 'pg';
import { memoryAgent, pgAgent, replied, type PgAgent } from './support/pg-agent';

/** What the parent gives a child. */
export interface ChildSetting {
  redis: string;
  prefix: string;
  /** The PostgreSQL schema's URL (agent mode). */
  db: string;
  instanceId: string;
  /** The wake worker's concurrency (agent) or the worker's (bullmq). */
  concurrency: number;
}

/** A run command. */
export interface RunCommand {
  cmd: 'run';
  kind: 'cold' | 'warm' | 'noop' | 'durable';
  callers: number;
  warmUpMs: number;
  ms: number;
  /** Names this run's sessions apart from earlier runs'. */
  tag: string;
}

/** What a run answers: completions in the window, and in all (the warm-up and the tail too). */
export interface RunResult {
  count: number;
  total: number;
}

/** Sessions each caller of a cold run goes round: each input finds its session idle. */
export const COLD_SESSIONS_PER_CALLER = 8;
/** Inputs each caller of a warm run keeps on their way to its one session, which stays held. */
export const WARM_IN_FLIGHT = 2;

/**
 * The options of the wake jobs (`wakeJobOptions` in `src/distribution/redis/wake-queue.ts`),
 * with a deduplication id of each job's own: the raw jobs cost what a wake job costs BullMQ.
 */
function noopJobOptions(id: string) {
  return {
    deduplication: { id, keepLastIfActive: true },
    attempts: 10,
    backoff: { type: 'exponential', delay: 200 },
    removeOnComplete: true,
    removeOnFail: true,
  };
}

/** Runs `send` in `loops` closed loops until the window ends; counts completions in it. */
async function closedLoop(
  command: RunCommand,
  loops: number,
  send: (caller: number, i: number) => Promise<void>,
): Promise<RunResult> {
  const started = performance.now();
  const from = started + command.warmUpMs;
  const until = from + command.ms;
  let count = 0;
  let total = 0;
  await Promise.all(
    Array.from({ length: loops }, async (_, caller) => {
      for (let i = 0; performance.now() < until; i++) {
        await send(caller, i);
        const at = performance.now();
        total++;
        if (at >= from && at < until) count++;
      }
    }),
  );
  return { count, total };
}

/** The agent of `mode`, started. */
function startAgent(setting: ChildSetting, mode: 'agent' | 'local' | 'memory'): Promise<PgAgent> {
  if (mode === 'memory') return memoryAgent();
  if (mode === 'local') return pgAgent(setting.db);
  return pgAgent(setting.db, {
    redis: setting.redis,
    prefix: setting.prefix,
    instanceId: setting.instanceId,
    concurrency: setting.concurrency,
  });
}

/**
 * The agent: an instance of distributed mode, the same agent in one process (`local`), or that
 * on the in-memory stores (`memory`), on its own sessions. Cold runs go round many sessions,
 * warm runs keep each session busy. */
async function agentChild(setting: ChildSetting, mode: 'agent' | 'local' | 'memory') {
  const instance = await startAgent(setting, mode);
  const input = async (sessionId: string, content: string) =>
    replied(await instance.agent.handleMessage({ sessionId, content, source: 'job' }));
  const me = setting.instanceId;
  return {
    run(command: RunCommand): Promise<RunResult> {
      if (command.kind === 'cold') {
        return closedLoop(command, command.callers, (caller, i) =>
          input(`${command.tag}-${me}-c${caller}-${i % COLD_SESSIONS_PER_CALLER}`, `question ${i}`),
        );
      }
      // Warm: WARM_IN_FLIGHT loops per caller on the caller's one session.
      return closedLoop(command, command.callers * WARM_IN_FLIGHT, (loop, i) =>
        input(
          `${command.tag}-${me}-w${Math.floor(loop / WARM_IN_FLIGHT)}`,
          `question ${loop}.${i}`,
        ),
      );
    },
    close: () => instance.close(),
  };
}

/**
 * The least any design can write to PostgreSQL for one input that the durable record
 * asks for, with none of the agent's work: the inbox row at acceptance, the input and its reply
 * in the history (one statement), the settlement. Three autocommitted statements on the
 * benchmark's own schema: the ceiling of a turn that writes its record one input at a time.
 */
export async function minimalRecord(
  pool: Pool,
  job: Pick<Job<{ sessionId: string }>, 'id' | 'data'>,
): Promise<void> {
  const { sessionId } = job.data;
  const now = new Date().toISOString();
  await pool.query(
    'insert into inbox (id, session_id, message, accepted_at) values ($1, $2, $3, $4)',
    [job.id, sessionId, JSON.stringify({ id: job.id, sessionId, content: 'question' }), now],
  );
  await pool.query(
    `insert into messages (id, session_id, role, content, metadata, created_at)
     values ($1, $2, 'user', 'question', '{}', $4), ($3, $2, 'assistant', 'answer', '{}', $4)`,
    [randomUUID(), sessionId, randomUUID(), now],
  );
  await pool.query('update inbox set settlement = $1, settled_at = $2 where id = $3', [
    JSON.stringify({ settled: 'turn', outcome: 'replied' }),
    now,
    job.id,
  ]);
}

/**
 * The raw BullMQ process: no-op jobs (or, `durable`, jobs that write `minimalRecord`), each
 * caller waiting for its job's completion.
 */
async function bullmqChild(setting: ChildSetting, durable: boolean) {
  const connection = new URL(setting.redis);
  const options = {
    connection: { host: connection.hostname, port: Number(connection.port || 6379) },
    prefix: setting.prefix,
  };
  const queue = new Queue('noop', options);
  // Connections let go soon after a run: the agents' runs that follow need the server's slots.
  const pool = durable
    ? new Pool({ connectionString: setting.db, idleTimeoutMillis: 200 })
    : undefined;
  // A failing write is a fault of this benchmark: loud at once, not ten retries later.
  const processor = pool
    ? (job: Job<{ sessionId: string }>) => minimalRecord(pool, job).catch(fatal)
    : async () => undefined;
  const worker = new Worker('noop', processor, {
    ...options,
    concurrency: setting.concurrency,
  });
  const events = new QueueEvents('noop', options);
  const waiting = new Map<string, () => void>();
  events.on('completed', ({ jobId }) => {
    waiting.get(jobId)?.();
    waiting.delete(jobId);
  });
  await Promise.all([worker.waitUntilReady(), events.waitUntilReady(), queue.waitUntilReady()]);
  let jobs = 0;
  return {
    run(command: RunCommand): Promise<RunResult> {
      return closedLoop(command, command.callers, async (caller, i) => {
        const id = `${command.tag}-${setting.instanceId}-${++jobs}`;
        // A durable job's session, named as a cold run's; no-op jobs carry nothing, as before.
        const sessionId = `${command.tag}-${setting.instanceId}-c${caller}-${i % COLD_SESSIONS_PER_CALLER}`;
        const data = durable ? { sessionId } : {};
        const done = new Promise<void>((resolve) => waiting.set(id, resolve));
        await queue.add('noop', data, { ...noopJobOptions(id), jobId: id });
        await done;
      });
    },
    async close() {
      await worker.close();
      await events.close();
      await queue.close();
      await pool?.end();
    },
  };
}

/** Ends the child with `error` on stderr (the parent then fails the benchmark). */
function fatal(error: unknown): never {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  const setting = JSON.parse(process.argv[3]) as ChildSetting;
  const child =
    mode === 'agent' || mode === 'local' || mode === 'memory'
      ? await agentChild(setting, mode)
      : mode === 'bullmq' || mode === 'durable'
        ? await bullmqChild(setting, mode === 'durable')
        : undefined;
  if (!child) throw new Error(`unknown mode ${mode}; use agent, local, memory, bullmq or durable`);
  const say = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
  say({ ready: true });
  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line) as RunCommand | { cmd: 'close' };
    if (command.cmd === 'close') break;
    say(await child.run(command));
  }
  await child.close();
}

if (require.main === module) {
  main().then(() => process.exit(0), fatal);
}
