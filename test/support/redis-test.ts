import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import { describeNeeding } from './describe-needing';

/**
 * Redis for the distribution specs: the shared test server (`TEST_REDIS_URL`, or the local
 * default), a key prefix of each test's own, and a clean-up that deletes every key under it.
 */

/** The test server: `TEST_REDIS_URL`, or the local default. */
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

let reachable: boolean | undefined;

/**
 * Whether the Redis test server answers PING. Synchronous (a child process), because jest
 * collects `describe` blocks synchronously and must know whether to skip them.
 */
export function redisReachable(): boolean {
  reachable ??=
    spawnSync(
      process.execPath,
      [
        '-e',
        `const Redis = require(${JSON.stringify(require.resolve('ioredis'))});
         const r = new Redis(process.argv[1], { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
         r.connect().then(() => r.ping()).then(() => { r.disconnect(); process.exit(0); }, () => process.exit(1));`,
        REDIS_URL,
      ],
      { timeout: 5000 },
    ).status === 0;
  return reachable;
}

/**
 * `describe` for suites that need Redis. Unreachable server: outside CI the suite is skipped
 * with a title that says so; with `CI` set it fails (never a silent skip in CI).
 */
export function describeRedis(title: string, suite: () => void): void {
  describeNeeding(
    title,
    redisReachable() ? undefined : `Redis not reachable at ${REDIS_URL}`,
    'Redis is reachable',
    suite,
  );
}

/** A key prefix no other test uses: `agent-test-<random>`. */
export function testPrefix(): string {
  return `agent-test-${randomBytes(5).toString('hex')}`;
}

/** The test server as BullMQ's `connection` option (host, port and database of REDIS_URL). */
export function redisConnection(): { host: string; port: number; db: number } {
  const url = new URL(REDIS_URL);
  const db = Number(url.pathname.slice(1) || 0);
  return { host: url.hostname, port: Number(url.port || 6379), db };
}

/** A client of the test server (the caller quits it). */
export function testRedis(): Redis {
  return new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
}

/** Deletes every key under `prefix` (SCAN, so a big server is not blocked). */
export async function deletePrefix(prefix: string): Promise<number> {
  const redis = testRedis();
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length) deleted += await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}
