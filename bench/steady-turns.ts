/**
 * Runs `N` steady turns (argument 1, default 1000; argument 2 `host` for the host store) of
 * `bench/support/zero-latency.ts` and exits: a fixed piece of work for instruction counting,
 * which does not move with the machine's speed as wall time does (BENCHMARKS.md, "Counting
 * instructions"):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     node --single-threaded -r @swc-node/register bench/steady-turns.ts 3000
 *
 * The per-turn count is the difference of two runs (3000 and 1000 turns) over 2000.
 */
import 'reflect-metadata';
import { steadyAgent } from './support/zero-latency';

async function main(): Promise<void> {
  const turns = Number(process.argv[2] ?? 1000);
  if (!Number.isInteger(turns) || turns < 0)
    throw new Error('the turn count must be a whole number');
  const steady = await steadyAgent({ hostStore: process.argv[3] === 'host' });
  for (let i = 0; i < turns; i++) {
    await steady.agent.handleMessage({ sessionId: 'steady', content: `hello ${i}` });
  }
  await steady.close();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
