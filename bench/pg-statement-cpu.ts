/**
 * CPU of one small PostgreSQL statement through the stores, on this process's side: 16 callers
 * in a closed loop, each reading one row by key (`count`: `HistoryStore.count`, `gen`:
 * `SessionStore.generationOf`) for a 4 s window after 1 s of warm-up. Prints statements/s and
 * this process's CPU per statement (user + system, and system alone). What a change to the
 * stores' way to the driver (`postgres-pool.ts`) saves per statement, where a whole turn
 * (`pg-turn-cpu.ts`) has a dozen statements and more spread than the saving.
 *
 * Run: node -r @swc-node/register bench/pg-statement-cpu.ts count|gen
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createSqlStores } from '../src';
import { tempPgSchema } from '../test/contracts/sql-test-db';

const CALLERS = 16;
const WARM_UP_MS = 1_000;
const WINDOW_MS = 4_000;

async function main(kind: 'count' | 'gen'): Promise<void> {
  const db = await tempPgSchema();
  const stores = await createSqlStores(db.url);
  let statements = 0;
  let stop = false;
  const loop = async (caller: number) => {
    const sessionId = `cpu-${caller}`;
    while (!stop) {
      if (kind === 'count') await stores.log.count(sessionId);
      else await stores.sessions.generationOf(sessionId);
      statements++;
    }
  };
  try {
    const loops = Array.from({ length: CALLERS }, (_, caller) => loop(caller));
    await delay(WARM_UP_MS);
    const [before, cpu0, at0] = [statements, process.cpuUsage(), Date.now()];
    await delay(WINDOW_MS);
    const [done, cpu] = [statements - before, process.cpuUsage(cpu0)];
    const seconds = (Date.now() - at0) / 1000;
    stop = true;
    await Promise.all(loops);
    const per = (micros: number) => Number((micros / done).toFixed(1));
    console.log(
      JSON.stringify({
        kind,
        statementsPerSecond: Math.round(done / seconds),
        cpuMicrosPerStatement: per(cpu.user + cpu.system),
        systemMicrosPerStatement: per(cpu.system),
      }),
    );
  } finally {
    await stores.close();
    await db.drop();
  }
}

main(process.argv[2] === 'gen' ? 'gen' : 'count').catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
