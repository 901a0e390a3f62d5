/**
 * `npm run bench`: runs every benchmark in this folder and prints markdown for BENCHMARKS.md.
 * Figures are ratios against a baseline measured in the same run, with medians.
 */
import { cpus } from 'node:os';
import { benchDistributed } from './distributed.bench';
import { benchMemory } from './memory.bench';
import { benchPeers } from './peers.section';
import { benchQueueBurst } from './queue-burst.bench';
import { benchRecovery } from './recovery.bench';
import { benchScale } from './scale.bench';
import { benchStores } from './stores.bench';
import { benchTracing } from './tracing.bench';
import { benchTurnCost } from './turn-cost.bench';
import { benchTurns } from './turns.bench';
import { benchUsage } from './usage.bench';

async function main(): Promise<void> {
  const sections = [
    await benchTurns(),
    await benchUsage(),
    await benchStores(),
    await benchMemory(),
    await benchRecovery(),
    await benchQueueBurst(),
    await benchTurnCost(),
    await benchTracing(),
    await benchScale(),
    await benchPeers(),
    await benchDistributed(),
  ];
  process.stdout.write(
    `# Benchmarks\n\nProduced by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)} ` +
      `(Node ${process.version}, ${cpus().length} cores).\n\n${sections.join('\n\n')}\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
