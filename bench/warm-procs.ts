/**
 * Warm added latency with each instance in its own process (`warm-procs-child.ts`), as a
 * deployment runs them. The in-process rows of `distributed-latency.ts` put both instances on one
 * event loop: the sender's reading of a settlement waits behind the holder's end-of-turn work,
 * and every relayed event is handled twice there. Here the holder is one process, the sender
 * another; the baseline is the same agent in one process (in-process mode), also a child.
 *
 * Per input: an anchor input takes the session on process H (its model call waits at a gate);
 * H watches for the measured input; the sender S sends it. S times `handleMessage` to the
 * settlement; H times the input's entry into its waiting list (where it opens the gate) to the
 * end of the input's own turn. S's time less H's is the way in plus the way back, each read on
 * one process's clock. Rows: in one process (S = H, in-process mode), distributed sent to
 * another instance (S ≠ H: a poke through H's mailbox, the settlement back through S's),
 * distributed sent to the holder (S = H). The rows take turns in blocks.
 *
 * Alone: node -r @swc-node/register -e "require('./bench/warm-procs.ts').warmAcrossProcesses().then(console.log)"
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createSqlStores } from '../src';
import { tempPgSchema } from '../test/contracts/sql-test-db';
import { deletePrefix, REDIS_URL, testPrefix } from '../test/support/redis-test';
import { added } from './distributed-latency';
import { percentile } from './support/stats';
import type { WarmChildSetting, WarmCommand } from './warm-procs-child';

const CHILD = join(__dirname, 'warm-procs-child.ts');
const BLOCKS = Number(process.env.WARM_BLOCKS ?? 8);
const BLOCK = 25;
const WARM_UP = 50;

/** A child process and its tagged answers. */
class Child {
  private readonly answers = new Map<string, Record<string, unknown>[]>();
  private readonly waiting = new Map<string, (answer: Record<string, unknown>) => void>();
  private readonly failures = new Set<(error: Error) => void>();
  private stderr = '';
  private tags = 0;

  private constructor(private readonly proc: ChildProcess) {
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      if (!line.startsWith('{')) return;
      const answer = JSON.parse(line) as Record<string, unknown>;
      const key = `${String(answer.tag)}:${Object.keys(answer).find((k) => k !== 'tag')}`;
      const waiter = this.waiting.get(key);
      if (waiter) {
        this.waiting.delete(key);
        waiter(answer);
      } else this.answers.set(key, [...(this.answers.get(key) ?? []), answer]);
    });
    proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    proc.once('exit', (code) => {
      const error = new Error(`a warm child exited ${code}: ${this.stderr.slice(-2000)}`);
      for (const fail of this.failures) fail(error);
    });
  }

  static async start(mode: 'local' | 'dist', setting: WarmChildSetting): Promise<Child> {
    const args = ['-r', '@swc-node/register', CHILD, mode, JSON.stringify(setting)];
    const proc = spawn(process.execPath, args, {
      cwd: join(__dirname, '..'),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const child = new Child(proc);
    await child.answer('', 'ready');
    return child;
  }

  /** Sends a command with a fresh tag; returns the tag. */
  send(command: Omit<Extract<WarmCommand, { tag: string }>, 'tag'>): string {
    const tag = `t${++this.tags}`;
    this.proc.stdin!.write(`${JSON.stringify({ ...command, tag })}\n`);
    return tag;
  }

  /** The answer with `key` to the command `tag`; rejects when the process exits first. */
  answer(tag: string, key: string): Promise<Record<string, unknown>> {
    const ready = this.answers.get(`${tag}:${key}`)?.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      this.failures.add(reject);
      this.waiting.set(`${tag}:${key}`, (answer) => {
        this.failures.delete(reject);
        resolve(answer);
      });
    });
  }

  async close(): Promise<void> {
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdin!.write('{"cmd":"close"}\n');
    await exited;
  }
}

let inputs = 0;

/** One warm input: the anchor on `holder`, the measured input from `sender`; ms. */
async function warmInput(holder: Child, sender: Child, sessionId: string): Promise<number> {
  const anchor = holder.send({ cmd: 'anchor', sessionId });
  await holder.answer(anchor, 'started');
  const content = `warm question ${++inputs}`;
  const watch = holder.send({ cmd: 'watch', sessionId, content });
  await holder.answer(watch, 'armed');
  const sent = sender.send({ cmd: 'send', sessionId, content });
  const { sentMs } = await sender.answer(sent, 'sentMs');
  const { heldMs } = await holder.answer(watch, 'heldMs');
  await holder.answer(anchor, 'settled');
  return Number(sentMs) - Number(heldMs);
}

/** Samples of the three rows, ms. */
export interface WarmProcessSamples {
  inProcess: number[];
  viaMailbox: number[];
  toHolder: number[];
}

/** The three rows' samples, on a PostgreSQL schema and a Redis prefix of their own. */
export async function warmProcessSamples(): Promise<WarmProcessSamples> {
  const db = await tempPgSchema();
  const prefix = testPrefix();
  const children: Child[] = [];
  try {
    await (await createSqlStores(db.url)).close();
    const setting = (instanceId: string) => ({ db: db.url, redis: REDIS_URL, prefix, instanceId });
    const local = await Child.start('local', setting('local'));
    children.push(local);
    const holder = await Child.start('dist', setting('warm-h'));
    children.push(holder);
    const sender = await Child.start('dist', setting('warm-s'));
    children.push(sender);
    const samples: WarmProcessSamples = { inProcess: [], viaMailbox: [], toHolder: [] };
    const rows: [Child, Child, number[]][] = [
      [local, local, samples.inProcess],
      [holder, sender, samples.viaMailbox],
      [holder, holder, samples.toHolder],
    ];
    const session = (row: number, i: number) => `warm-procs-${row}-${i % 20}`;
    for (const [r, [h, s]] of rows.entries()) {
      for (let i = 0; i < WARM_UP; i++) await warmInput(h, s, session(r, i));
    }
    for (let b = 0; b < BLOCKS; b++) {
      for (const [r, [h, s, into]] of rows.entries()) {
        for (let i = 0; i < BLOCK; i++) into.push(await warmInput(h, s, session(r, b * BLOCK + i)));
      }
    }
    return samples;
  } finally {
    for (const child of children) await child.close().catch(() => undefined);
    await deletePrefix(prefix);
    await db.drop();
  }
}

const ms = (n: number) => n.toFixed(2);

/** The rows as markdown, with the warm target's verdict on the mailbox row. */
export async function warmAcrossProcesses(): Promise<string[]> {
  const samples = await warmProcessSamples();
  const row = (label: string, of: number[]) => {
    const own = of === samples.inProcess;
    const add = added(samples.inProcess, of);
    return `| ${label} | ${ms(percentile(of, 50))} | ${ms(percentile(of, 99))} | ${own ? '' : ms(add.p50)} | ${own ? '' : ms(add.p99)} |`;
  };
  const viaAdded = added(samples.inProcess, samples.viaMailbox).p50;
  return [
    `Warm added latency with each instance in its own process (\`bench/warm-procs.ts\`; ${BLOCKS * BLOCK} inputs per row in blocks of ${BLOCK}, the rows taking turns, after ${WARM_UP} warm-up inputs each; the sender's \`handleMessage\`-to-settlement time less the holder's time from the input's entry into its waiting list to the end of its turn), ms:`,
    '',
    '| input | p50 | p99 | added p50 | added p99 |',
    '|---|---:|---:|---:|---:|',
    row('warm, in one process (baseline, its own process): way in + way back', samples.inProcess),
    row('warm, distributed, sent to another instance (mailbox poke)', samples.viaMailbox),
    row('warm, distributed, sent to the holder', samples.toHolder),
    '',
    `**Warm target with instances in their own processes (at most 0.5 ms p50 added, mailbox poke): ${viaAdded <= 0.5 ? 'met' : 'not met'}** (${ms(viaAdded)} ms).`,
  ];
}
