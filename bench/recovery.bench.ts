/**
 * Restart recovery benchmark: a SQLite file whose inbox holds N unsettled inputs (one interrupted
 * turn with its archived input, the rest waiting) is opened by a fresh agent; the time from
 * opening the stores to the end of `InputRecovery.recover()` at bootstrap (interrupted turn
 * closed, waiting inputs handed to their lanes), against the baseline of the same boot on a file
 * with an empty inbox. Medians of 5 runs.
 *
 * Run: node -r @swc-node/register -e "require('./bench/recovery.bench.ts').benchRecovery().then(console.log)"
 */
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { AgentModule, WellKnownMetadataKeys as K } from '../src';
import { InputRecovery } from '../src/agent/input-recovery';
import { DemoProvider } from '../src/llm';
import { createSqlStores } from '../src/session-bridge';
import { median } from './support/stats';

const RUNS = 5;
const SIZES = [100, 1000];

/** A file whose inbox has one interrupted turn and `waiting` waiting inputs over 10 sessions. */
async function prepare(file: string, waiting: number): Promise<void> {
  const stores = await createSqlStores(file);
  const first = { id: 'interrupted', sessionId: 's0', content: 'hello' };
  await stores.inbox.accept(first);
  await stores.inbox.enterTurn(['interrupted'], 't-interrupted');
  await stores.log.append([
    {
      sessionId: 's0',
      role: 'user',
      content: 'hello',
      metadata: { [K.TurnId]: 't-interrupted', [K.TurnEntry]: 'opened' },
    },
  ]);
  for (let i = 0; i < waiting; i++) {
    await stores.inbox.accept({
      id: `w${i}`,
      sessionId: `s${i % 10}`,
      content: `job ${i}`,
      source: 'job',
    });
  }
  await stores.close();
}

async function boot(file: string, expectedTurns: number): Promise<number> {
  const started = performance.now();
  const stores = await createSqlStores(file);
  @Module({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      AgentModule.forRoot({
        // The offline demo model: the resumed turns run after recovery; only boot and recovery are timed.
        llmProvider: new DemoProvider(),
        sessionStore: stores.sessions,
        historyStore: stores.log,
        messageArchive: stores.log,
        inputInbox: stores.inbox,
        turnTimeoutMs: 0,
      }),
    ],
  })
  class BenchModule {}
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: false });
  const report = app.get(InputRecovery).report!;
  const ms = performance.now() - started;
  if (report.closedTurns !== expectedTurns) {
    throw new Error(`expected ${expectedTurns} interrupted turn(s), got ${report.closedTurns}`);
  }
  await app.close();
  await stores.close();
  return ms;
}

/** Markdown section for BENCHMARKS.md. */
export async function benchRecovery(): Promise<string> {
  const rows: string[] = [];
  for (const size of SIZES) {
    const base: number[] = [];
    const full: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-bench-'));
      const empty = join(dir, 'empty.sqlite');
      const file = join(dir, 'agent.sqlite');
      await (await createSqlStores(empty)).close();
      await prepare(file, size);
      base.push(await boot(empty, 0));
      full.push(await boot(file, 1));
      rmSync(dir, { recursive: true, force: true });
    }
    const b = median(base);
    const f = median(full);
    rows.push(`| ${size} | ${b.toFixed(1)} | ${f.toFixed(1)} | ${(f / b).toFixed(2)}x |`);
  }
  return [
    `### Restart recovery (SQLite file, median of ${RUNS} runs)`,
    '',
    'One interrupted turn plus N waiting inputs in the inbox. Baseline: the agent booting on a file with an empty inbox; recovery: the same boot on the file with the inputs, closing the interrupted turn and handing every waiting input to its lane (all before it serves anything).',
    '',
    '| waiting inputs | empty-inbox boot ms | boot + recovery ms | ratio |',
    '|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}
