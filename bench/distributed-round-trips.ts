/**
 * Round trips per input of distributed mode (issue 17), counted in this process: every query
 * the `pg` clients send (by kind: `begin`, `commit`, an upsert of `session_fences`, ...) and
 * every command the ioredis clients send (by name; a script by its `EVALSHA`), per cold input
 * (an idle session, one instance) and per warm input (the session held by a turn that waits,
 * the input sent to the other instance or to the holder), against the same agent in one process.
 * What the latency rows cost in messages on the wire.
 *
 * Alone: node -r @swc-node/register -e "require('./bench/distributed-round-trips.ts').roundTrips().then(console.log)"
 */
import Redis from 'ioredis';
import { Client } from 'pg';
import { createSqlStores } from '../src';
import { tempPgSchema } from '../test/contracts/sql-test-db';
import { deletePrefix, REDIS_URL, testPrefix } from '../test/support/redis-test';
import { coldInput, Gate, GatedProvider, warmInput } from './distributed-latency';
import { pgAgent, type DistributedSetting, type PgAgent } from './support/pg-agent';

const INPUTS = Number(process.env.ROUND_TRIP_INPUTS ?? 40);
const WARM_UP = 10;

/** Counts of what went to PostgreSQL and Redis, by kind. */
class Counter {
  readonly sql = new Map<string, number>();
  readonly redis = new Map<string, number>();
  private on = false;

  install(): () => void {
    const query = Client.prototype.query;
    const send = Redis.prototype.sendCommand;
    const countSql = (text: unknown) => this.on && this.add(this.sql, sqlKind(text));
    const countRedis = (name: string) => this.on && this.add(this.redis, name);
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      countSql(args[0]);
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    Redis.prototype.sendCommand = function (this: Redis, ...args: unknown[]) {
      countRedis(String((args[0] as { name?: string } | undefined)?.name ?? '?'));
      return (send as (...a: unknown[]) => unknown).apply(this, args);
    };
    return () => {
      Client.prototype.query = query;
      Redis.prototype.sendCommand = send;
    };
  }

  /** Counts only what `run` sends (and what runs meanwhile). */
  async during<T>(run: () => Promise<T>): Promise<T> {
    this.on = true;
    try {
      return await run();
    } finally {
      this.on = false;
    }
  }

  private add(into: Map<string, number>, kind: string): void {
    into.set(kind, (into.get(kind) ?? 0) + 1);
  }
}

/** A query's kind: its verb and, for writes, its table. */
function sqlKind(query: unknown): string {
  const text = typeof query === 'string' ? query : String((query as { text?: string })?.text);
  const words = text.trim().replace(/"/g, '').split(/\s+/);
  const verb = words[0].toLowerCase();
  if (verb === 'insert') return `insert ${words[2]}`;
  if (verb === 'update') return `update ${words[1]}`;
  if (verb === 'delete') return `delete ${words[2]}`;
  if (verb === 'select') {
    const from = words.findIndex((w) => w.toLowerCase() === 'from');
    return `select ${from >= 0 ? words[from + 1] : ''}`;
  }
  return verb;
}

/** Per input, the counts of `run` over `inputs` inputs. */
async function perInput(counter: Counter, inputs: number, run: (i: number) => Promise<unknown>) {
  counter.sql.clear();
  counter.redis.clear();
  await counter.during(async () => {
    for (let i = 0; i < inputs; i++) await run(i);
  });
  const per = (map: Map<string, number>) =>
    Object.fromEntries([...map].map(([k, v]) => [k, v / inputs]).sort());
  const total = (map: Map<string, number>) => [...map.values()].reduce((a, b) => a + b, 0);
  return {
    sql: total(counter.sql) / inputs,
    redis: total(counter.redis) / inputs,
    sqlKinds: per(counter.sql),
    redisKinds: per(counter.redis),
  };
}

type Counts = Awaited<ReturnType<typeof perInput>>;

/** Cold inputs, one instance against one process. */
async function cold(counter: Counter, db: string, setting: DistributedSetting) {
  const rows: Record<string, Counts> = {};
  for (const [label, distribution] of [
    ['cold, in one process', undefined],
    ['cold, distributed', setting],
  ] as const) {
    const app = await pgAgent(db, distribution);
    try {
      const session = (i: number) => `rt-cold-${label}-${i % 10}`;
      for (let i = 0; i < WARM_UP; i++) await coldInput(app, session(i));
      rows[label] = await perInput(counter, INPUTS, (i) => coldInput(app, session(i)));
    } finally {
      await app.close();
    }
  }
  return rows;
}

/** Warm inputs (each with its anchor input: two inputs per row's input). */
async function warm(counter: Counter, db: string, a: DistributedSetting, b: DistributedSetting) {
  const gate = new Gate();
  const apps: PgAgent[] = [];
  const rows: Record<string, Counts> = {};
  try {
    apps.push(await pgAgent(db, undefined, new GatedProvider(gate)));
    apps.push(await pgAgent(db, a, new GatedProvider(gate)));
    apps.push(await pgAgent(db, b, new GatedProvider(gate)));
    const [local, ...pair] = apps;
    const other = (holder: PgAgent) => (holder === pair[0] ? pair[1] : pair[0]);
    const cases = [
      ['warm pair (anchor + input), in one process', [local], (h: PgAgent) => h],
      ['warm pair, distributed, sent to another instance', pair, other],
      ['warm pair, distributed, sent to the holder', pair, (h: PgAgent) => h],
    ] as const;
    for (const [label, group, pick] of cases) {
      const session = (i: number) => `rt-warm-${label}-${i % 10}`;
      for (let i = 0; i < WARM_UP; i++) await warmInput([...group], gate, session(i), pick);
      rows[label] = await perInput(counter, INPUTS, (i) =>
        warmInput([...group], gate, session(i), pick),
      );
    }
  } finally {
    gate.release();
    for (const app of apps.reverse()) await app.close();
  }
  return rows;
}

/** The counts of every row, cold and warm. */
async function countAll(): Promise<Record<string, Counts>> {
  const counter = new Counter();
  const uninstall = counter.install();
  const db = await tempPgSchema();
  const prefix = testPrefix();
  const base = { redis: REDIS_URL, prefix, concurrency: 16 };
  try {
    await (await createSqlStores(db.url)).close();
    return {
      ...(await cold(counter, db.url, { ...base, instanceId: 'rt-a' })),
      ...(await warm(
        counter,
        db.url,
        { ...base, instanceId: 'rt-a' },
        { ...base, instanceId: 'rt-b' },
      )),
    };
  } finally {
    uninstall();
    await deletePrefix(prefix);
    await db.drop();
  }
}

/** Counts per input, cold and warm, as JSON (kinds included). */
export async function roundTrips(): Promise<string> {
  return JSON.stringify(await countAll(), null, 2);
}

/** The counts as a markdown table, for the distributed section of BENCHMARKS.md. */
export async function roundTripsSection(): Promise<string[]> {
  const rows = await countAll();
  const kinds = (counts: Record<string, number>, of: RegExp) =>
    Object.entries(counts)
      .filter(([kind]) => of.test(kind))
      .reduce((sum, [, n]) => sum + n, 0);
  return [
    `Round trips per input (${INPUTS} inputs per row, counted on the \`pg\` and ioredis clients of this process; a warm row is the anchor input and the measured one together; a Redis MULTI block counts each command, though it is sent at once):`,
    '',
    '| input | PostgreSQL queries | of them `begin` / `commit` | `session_fences` upserts | Redis commands |',
    '|---|---:|---:|---:|---:|',
    ...Object.entries(rows).map(
      ([label, c]) =>
        `| ${label} | ${c.sql.toFixed(1)} | ${kinds(c.sqlKinds, /^(begin|commit)$/).toFixed(1)} | ${kinds(c.sqlKinds, /^insert session_fences$/).toFixed(1)} | ${c.redis.toFixed(1)} |`,
    ),
  ];
}
