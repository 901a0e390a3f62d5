/**
 * Session-store benchmark: archive writes per second (single-message appends and 3-message
 * tool-call groups) and history reads per second (limit 50 over a 2,000-message session), for
 * SQLite (temp file) and PostgreSQL (temp schema), against the in-memory adapter measured in the
 * same run. Medians of 5 runs.
 *
 * Run: node -r @swc-node/register -e "require('./bench/stores.bench.ts').benchStores().then(console.log)"
 * PostgreSQL: `BENCH_PG_URL` (default postgres://postgres@127.0.0.1:5432/test); skipped when absent.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ControlKinds,
  type HistoryStore,
  type MessageArchive,
  type NewMessage,
} from '../src/contracts';
import { createSqlStores, MemoryMessageLog } from '../src/session-bridge';
import { median } from './support/stats';

const RUNS = 5;
const HISTORY_SIZE = 2_000;
const HISTORY_LIMIT = 50;
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Operations per run, per backend: enough to time, few enough to keep the bench under ~60 s. */
const OPS = {
  memory: { single: 20_000, group: 10_000, read: 5_000 },
  sqlite: { single: 2_000, group: 1_000, read: 1_000 },
  postgres: { single: 500, group: 300, read: 300 },
} as const;

type Backend = keyof typeof OPS;
type Operation = keyof (typeof OPS)[Backend];

/** What one backend under test offers, and how to let it go. */
interface Subject {
  log: HistoryStore & MessageArchive;
  close(): Promise<void>;
}

const LABELS: Record<Operation, string> = {
  single: 'append, 1 message (appends/s)',
  group: 'append, 3-message group (appends/s)',
  read: `history, limit ${HISTORY_LIMIT} of ${HISTORY_SIZE} (reads/s)`,
};

/** A user message of about 40 words. */
const text = (i: number) => `message ${i}: ${'lorem ipsum dolor sit amet '.repeat(8)}`;

/** A tool-call group: the assistant's call, its result, and the reply. */
function group(sessionId: string, i: number): NewMessage[] {
  const turnId = `t${i}`;
  return [
    {
      sessionId,
      role: 'assistant',
      content: '',
      toolCalls: [{ id: `c${i}`, type: 'function', function: { name: 'search', arguments: '{}' } }],
      metadata: { turnId },
    },
    { sessionId, role: 'tool', content: text(i), toolCallId: `c${i}`, metadata: { turnId } },
    { sessionId, role: 'assistant', content: text(i), metadata: { turnId } },
  ];
}

/** Operations per second of `ops` sequential calls of `step`. */
async function rate(ops: number, step: (i: number) => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < ops; i++) await step(i);
  return ops / (Number(process.hrtime.bigint() - start) / 1e9);
}

/** A session of 2,000 messages, one control marker every 25. */
async function seed(log: MessageArchive, sessionId: string): Promise<void> {
  for (let start = 0; start < HISTORY_SIZE; start += 100) {
    await log.append(
      Array.from({ length: 100 }, (_, k): NewMessage => {
        const i = start + k;
        return i % 25 === 24
          ? { sessionId, role: 'system', content: '', kind: ControlKinds.EventMarker, metadata: {} }
          : { sessionId, role: i % 2 ? 'assistant' : 'user', content: text(i), metadata: {} };
      }),
    );
  }
}

/** Medians of each operation on one backend. */
async function measure(backend: Backend, open: () => Promise<Subject>) {
  const subject = await open();
  try {
    const { log } = subject;
    const ops = OPS[backend];
    const readSession = `read-${backend}`;
    await seed(log, readSession);
    const samples: Record<Operation, number[]> = { single: [], group: [], read: [] };
    for (let run = 0; run < RUNS; run++) {
      const sid = `write-${run}`;
      samples.single.push(
        await rate(ops.single, (i) =>
          log.append([{ sessionId: sid, role: 'user', content: text(i), metadata: {} }]),
        ),
      );
      samples.group.push(await rate(ops.group, (i) => log.append(group(`${sid}-g`, i))));
      samples.read.push(
        await rate(ops.read, () => log.history(readSession, { limit: HISTORY_LIMIT })),
      );
    }
    return {
      single: median(samples.single),
      group: median(samples.group),
      read: median(samples.read),
    };
  } finally {
    await subject.close();
  }
}

/** A SQLite file in a temp directory, removed on close. */
async function openSqlite(): Promise<Subject> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-bench-'));
  const stores = await createSqlStores(join(dir, 'bench.sqlite'));
  return {
    log: stores.log,
    close: async () => {
      await stores.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A temp schema on the PostgreSQL server, dropped on close; undefined when unreachable. */
async function openPostgres(): Promise<Subject | undefined> {
  const { Client } = await import('pg');
  const admin = new Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  const schema = `agent_bench_${randomBytes(6).toString('hex')}`;
  await admin.query(`create schema "${schema}"`);
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const stores = await createSqlStores(url.toString());
  return {
    log: stores.log,
    close: async () => {
      await stores.close();
      await admin.query(`drop schema "${schema}" cascade`);
      await admin.end();
    },
  };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** Markdown: one table of SQLite and PostgreSQL against the in-memory baseline. */
export async function benchStores(): Promise<string> {
  const memory = await measure('memory', async () => ({
    log: new MemoryMessageLog(),
    close: async () => undefined,
  }));
  const results: Array<[string, Record<Operation, number>]> = [['memory (baseline)', memory]];
  results.push(['SQLite (file, WAL)', await measure('sqlite', openSqlite)]);
  const pg = await openPostgres();
  let note = '';
  if (pg) {
    results.push(['PostgreSQL (local)', await measure('postgres', async () => pg)]);
  } else {
    note = `\n\nPostgreSQL section skipped: no server reachable at ${new URL(PG_URL).host}.`;
  }
  const rows = results.flatMap(([name, figures]) =>
    (Object.keys(LABELS) as Operation[]).map(
      (op) =>
        `| ${name} | ${LABELS[op]} | ${fmt(figures[op])} | ${(figures[op] / memory[op]).toFixed(3)}x |`,
    ),
  );
  return (
    [
      '## Session stores',
      '',
      `Medians of ${RUNS} runs; sequential calls, one writer. Ratio: the backend's rate divided by ` +
        'the in-memory adapter measured in the same run (higher is faster).',
      '',
      '| backend | operation | per second | ratio vs memory |',
      '|---|---|---:|---:|',
      ...rows,
    ].join('\n') + note
  );
}
