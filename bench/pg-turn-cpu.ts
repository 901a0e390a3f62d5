/**
 * CPU per turn of the agent on PostgreSQL stores: 16 callers in a closed loop on one process
 * (each input to an idle session, 8 sessions per caller, the zero-latency model of
 * `bench/support`), in one process (`local`) or as one instance of distributed mode on the local
 * Redis (`dist`). Prints one JSON line: turns/s, this process's CPU per turn (user and system),
 * and the whole machine's busy CPU per turn from `/proc/stat` (PostgreSQL and Redis included).
 * What a store change saves in CPU, where the latency rows of `distributed.bench.ts` only move
 * within their spread.
 *
 * Run: node -r @swc-node/register bench/pg-turn-cpu.ts local|dist   (MS: the window, default 4000)
 * (`AGENT_DB_PREPARE=false`: the statements unprepared, as before they were prepared.)
 */
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { createSqlStores } from '../src';
import { tempPgSchema } from '../test/contracts/sql-test-db';
import { deletePrefix, REDIS_URL, testPrefix } from '../test/support/redis-test';
import { pgAgent, replied } from './support/pg-agent';

const CALLERS = 16;
const SESSIONS_PER_CALLER = 8;
const WARM_UP_MS = 1_000;
const WINDOW_MS = Number(process.env.MS ?? 4_000);

/** The machine's CPU time counters (user, nice, system, idle, iowait, ...), in ticks. */
function machineTicks(): number[] {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  return line.trim().split(/\s+/).slice(1).map(Number);
}

async function main(mode: string): Promise<void> {
  const db = await tempPgSchema();
  const prefix = testPrefix();
  await (await createSqlStores(db.url)).close();
  const setting = { redis: REDIS_URL, prefix, instanceId: 'cpu', concurrency: CALLERS };
  const app = await pgAgent(db.url, mode === 'dist' ? setting : undefined);
  let turns = 0;
  let stop = false;
  const loop = async (caller: number) => {
    for (let i = 0; !stop; i++) {
      const sessionId = `cpu-${caller}-${i % SESSIONS_PER_CALLER}`;
      replied(await app.agent.handleMessage({ sessionId, content: `question ${i}` }));
      turns++;
    }
  };
  try {
    const loops = Array.from({ length: CALLERS }, (_, caller) => loop(caller));
    await delay(WARM_UP_MS);
    const [turns0, cpu0, ticks0, at0] = [turns, process.cpuUsage(), machineTicks(), Date.now()];
    await delay(WINDOW_MS);
    const [done, cpu, ticks] = [turns - turns0, process.cpuUsage(cpu0), machineTicks()];
    const seconds = (Date.now() - at0) / 1000;
    stop = true;
    await Promise.all(loops);
    const spent = ticks.map((t, i) => t - ticks0[i]);
    const all = spent.reduce((a, b) => a + b, 0);
    const busyCores = ((all - spent[3] - spent[4]) / all) * cpuCount();
    const perTurn = (micros: number) => Number((micros / 1000 / done).toFixed(3));
    console.log(
      JSON.stringify({
        mode,
        turnsPerSecond: Number((done / seconds).toFixed(1)),
        processCpuMsPerTurn: perTurn(cpu.user + cpu.system),
        userMsPerTurn: perTurn(cpu.user),
        systemMsPerTurn: perTurn(cpu.system),
        machineBusyCores: Number(busyCores.toFixed(2)),
        machineCpuMsPerTurn: Number(((busyCores * seconds * 1000) / done).toFixed(3)),
      }),
    );
  } finally {
    await app.close();
    await db.drop();
    await deletePrefix(prefix);
  }
}

function cpuCount(): number {
  return readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .filter((l) => /^cpu\d/.test(l)).length;
}

main(process.argv[2] === 'dist' ? 'dist' : 'local').catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
