/**
 * One process of the distributed-mode benchmark (`distributed.bench.ts`): an instance of
 * distributed mode (`agent`: an application on the shared PostgreSQL schema and Redis prefix,
 * the zero-latency model), the same agent in one process (`local`, for reference), or a raw
 * BullMQ worker process (`bullmq`: a queue, a worker with a
 * no-op processor, and `QueueEvents` for the callers' completions). Run with
 * `-r @swc-node/register`; argument 2 is the mode, argument 3 a JSON `ChildSetting`.
 *
 * It prints `{"ready":true}` once set up, then answers each command line on stdin with one JSON
 * line: `{"cmd":"run","kind":"cold"|"warm"|"noop","callers":K,"warmUpMs":W,"ms":M}` runs K
 * callers in a closed loop (each waits for its input's settlement, or its job's completion,
 * before sending the next) and counts those completed in the M ms after a warm-up of W ms;
 * `{"cmd":"close"}` closes and exits.
 */
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { pgAgent, replied, type PgAgent } from './support/pg-agent';

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
  kind: 'cold' | 'warm' | 'noop';
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

/**
 * The agent: an instance of distributed mode, or (`local`) the same agent in one process, on its
 * own sessions. Cold runs go round many sessions, warm runs keep each session busy. */
async function agentChild(setting: ChildSetting, distributed: boolean) {
  const instance: PgAgent = await pgAgent(
    setting.db,
    distributed
      ? {
          redis: setting.redis,
          prefix: setting.prefix,
          instanceId: setting.instanceId,
          concurrency: setting.concurrency,
        }
      : undefined,
  );
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

/** The raw BullMQ process: no-op jobs, each caller waiting for its job's completion. */
async function bullmqChild(setting: ChildSetting) {
  const connection = new URL(setting.redis);
  const options = {
    connection: { host: connection.hostname, port: Number(connection.port || 6379) },
    prefix: setting.prefix,
  };
  const queue = new Queue('noop', options);
  const worker = new Worker('noop', async () => undefined, {
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
      return closedLoop(command, command.callers, async () => {
        const id = `${setting.instanceId}-${++jobs}`;
        const done = new Promise<void>((resolve) => waiting.set(id, resolve));
        await queue.add('noop', {}, { ...noopJobOptions(id), jobId: id });
        await done;
      });
    },
    async close() {
      await worker.close();
      await events.close();
      await queue.close();
    },
  };
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  const setting = JSON.parse(process.argv[3]) as ChildSetting;
  const child =
    mode === 'agent' || mode === 'local'
      ? await agentChild(setting, mode === 'agent')
      : mode === 'bullmq'
        ? await bullmqChild(setting)
        : undefined;
  if (!child) throw new Error(`unknown mode ${mode}; use agent, local or bullmq`);
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
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(
        `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      process.exit(1);
    },
  );
}
