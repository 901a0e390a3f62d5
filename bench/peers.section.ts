/**
 * The peers section of `npm run bench`: the peer frameworks live in their own package
 * (`bench/peers/package.json`, with its own lock file) so the main install stays lean. This
 * installs them when missing, then loads the benchmark with a runtime `require`, so the main
 * typecheck and lint never need the peer packages.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Runs the peer frameworks benchmark (`bench/peers/peers.bench.ts`); returns its markdown. */
export async function benchPeers(): Promise<string> {
  const folder = join(__dirname, 'peers');
  if (!existsSync(join(folder, 'node_modules'))) {
    execFileSync('npm', ['ci', '--prefix', folder, '--no-audit', '--no-fund'], {
      stdio: ['inherit', 2, 'inherit'], // npm's output on stderr: stdout carries the markdown
    });
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const peers = require('./peers/peers.bench') as { benchPeers(): Promise<string> };
  return peers.benchPeers();
}
