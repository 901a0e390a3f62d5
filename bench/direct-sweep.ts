/**
 * The heartbeat sweep of the direct set (issue 17): every instance sweeps `<prefix>:direct` (the
 * sessions taken where their input came) every third of a lease for leases that ran out
 * unreleased. Measured on the local Redis, for as many held sessions as 10 and 100 instances of
 * 64 sessions run: the time one sweep takes (Redis runs a script alone, so this is how long it
 * blocks every other client) with the sweep of `SessionLeases.sweepDirect` (a sorted set scored
 * by when each lease runs out; nothing due) against the sweep it replaced (a plain set, every
 * member's lease looked at by every sweep), both in this run; medians of 21 sweeps.
 *
 * Alone: node -r @swc-node/register -e "require('./bench/direct-sweep.ts').directSweepSection().then((l) => console.log(l.join('\n')))"
 */
import Redis from 'ioredis';
import { RedisKeys } from '../src/distribution/redis/redis-keys';
import { SessionLeases } from '../src/distribution/redis/session-leases';
import { deletePrefix, REDIS_URL, testPrefix } from '../test/support/redis-test';
import { median } from './support/stats';

/** The sweep before the sorted set (commit `ad4b214`): the baseline. */
const SET_SWEEP = `
local orphaned = {}
for _, session in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. session) == 0 then
    redis.call('SREM', KEYS[1], session)
    orphaned[#orphaned + 1] = session
  end
end
return orphaned`;

const LEASE_MS = 10_000;
const SWEEPS = 21;
/** Held sessions: 10 and 100 instances running 64 sessions each. */
const SIZES = [640, 6_400];

async function timed(run: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < SWEEPS; i++) {
    const started = process.hrtime.bigint();
    await run();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return median(times);
}

/** One size: the held sessions' leases (live) in both sets, then both sweeps and a PING. */
async function measure(redis: Redis, members: number) {
  const prefix = testPrefix();
  const keys = new RedisKeys(prefix);
  const plainSet = `${prefix}:direct-set`;
  try {
    const [seconds] = await redis.time();
    const now = Number(seconds) * 1000;
    const fill = redis.pipeline();
    for (let i = 0; i < members; i++) {
      fill.set(keys.lease(`s${i}`), 'a|1', 'PX', 60_000);
      fill.sadd(plainSet, `s${i}`);
      // Granted or renewed over the last lease: their ends spread over the next one.
      fill.zadd(keys.direct(), now + LEASE_MS - (i % LEASE_MS), `s${i}`);
    }
    await fill.exec();
    const leases = new SessionLeases(redis, { prefix, instanceId: 'bench', leaseMs: LEASE_MS });
    try {
      const sorted = await timed(() => leases.sweepDirect());
      const plain = await timed(() => redis.eval(SET_SWEEP, 1, plainSet, keys.lease('')));
      const ping = await timed(() => redis.ping());
      return { members, sorted, plain, ping };
    } finally {
      leases.stop();
    }
  } finally {
    await deletePrefix(prefix);
  }
}

/** Markdown lines of the section (Redis must be reachable). */
export async function directSweepSection(): Promise<string[]> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    const rows = [];
    for (const members of SIZES) rows.push(await measure(redis, members));
    const ms = (n: number) => n.toFixed(3);
    // Every instance sweeps every third of a lease.
    const perSecond = (sweepMs: number, instances: number) =>
      ((sweepMs * instances) / (LEASE_MS / 3 / 1000)).toFixed(1);
    return [
      `Heartbeat sweep of the direct set (every instance, every third of a ${LEASE_MS / 1000} s lease), median of ${SWEEPS} sweeps, ms per sweep as this client sees it (the round trip included: PING alone is the round trip; Redis runs a script alone, blocking every other client meanwhile):`,
      '',
      '| held sessions (instances x 64) | a plain set, every lease looked at (before) | sorted by lease end, none due (now) | PING | ms per second, all instances sweeping: before / now |',
      '|---:|---:|---:|---:|---:|',
      ...rows.map((r) => {
        const instances = r.members / 64;
        return `| ${r.members} (${instances} x 64) | ${ms(r.plain)} | ${ms(r.sorted)} | ${ms(r.ping)} | ${perSecond(r.plain, instances)} / ${perSecond(r.sorted, instances)} |`;
      }),
      '',
      'Now a session is looked at only once its lease was due to run out (about every two thirds',
      "of a lease, by whichever instance sweeps first: a few µs each), on top of the sweeps' own round trips.",
    ];
  } finally {
    redis.disconnect();
  }
}
