import type Redis from 'ioredis';
import { AgentError } from '../../contracts';

/**
 * The start-up check of the Redis that distributed mode runs on (`REDIS_URL`): settings that
 * would lose leases or queued work are errors, a Redis that keeps nothing on disk is a warning.
 */

/** What {@link checkRedisSettings} found, for the start-up log. */
export interface RedisSettingsReport {
  /** `maxmemory-policy` (`noeviction` once the check passed), or `'unknown'` if unreadable. */
  maxmemoryPolicy: string;
  /**
   * `'aof'` (appendonly yes), `'rdb'` (save points only), `'none'`, or `'unknown'` when CONFIG
   * is refused and INFO cannot tell whether save points are set (AOF off).
   */
  persistence: 'aof' | 'rdb' | 'none' | 'unknown';
  /** `redis_version` of INFO server, or `'unknown'` if unreadable. */
  version: string;
  /** One line each, naming REDIS_URL: what to change for production. */
  warnings: string[];
}

/** The Redis of `REDIS_URL` is set up so that distributed mode would lose work; one line. */
export class RedisSettingsError extends AgentError {
  constructor(
    /** The setting at fault: `'maxmemory-policy'`, `'version'` or `'redis_mode'` (a cluster). */
    readonly setting: string,
    problem: string,
  ) {
    super(`REDIS_URL: ${problem.replace(/\s+/g, ' ')}`);
  }
}

/** The oldest Redis distributed mode runs on (its scripts and BullMQ need it). */
const MIN_VERSION = [6, 2] as const;

/** Settings as read; `undefined` where they could not be read. */
interface Observed {
  version?: string;
  /** `redis_mode` of INFO server: `standalone`, `sentinel` or `cluster`. */
  mode?: string;
  policy?: string;
  /** `appendonly` (CONFIG) or `aof_enabled` (INFO persistence). */
  aof?: boolean;
  /** CONFIG GET save: `''` for none; INFO does not show it. */
  save?: string;
}

/**
 * Checks the Redis of distributed mode at start-up. Reads CONFIG GET `maxmemory-policy`,
 * `appendonly` and `save`, and INFO server (`redis_version`); where CONFIG is refused (managed
 * services rename or forbid it) it reads INFO memory (`maxmemory_policy`) and INFO persistence
 * (`aof_enabled`) instead.
 *
 * @throws RedisSettingsError when the policy is not `noeviction` (evicted leases or queued work
 *   are lost work), the version is below 6.2, or Redis runs in cluster mode (`redis_mode`).
 * @returns the settings found, with warnings (not errors) when Redis keeps nothing on disk or
 *   when that could not be checked. Connection errors are passed on as they are.
 */
export async function checkRedisSettings(redis: Redis): Promise<RedisSettingsReport> {
  const observed = await observe(redis);
  const warnings: string[] = [];
  if (observed.mode === 'cluster') {
    throw new RedisSettingsError(
      'redis_mode',
      'Redis runs in cluster mode; distributed mode needs one Redis, not a cluster (its scripts touch several keys of a session and of the instances at once, which a cluster keeps on different nodes): use a standalone Redis, with a replica and Sentinel for failover',
    );
  }
  const version = checkVersion(observed.version, warnings);
  const maxmemoryPolicy = checkPolicy(observed.policy, warnings);
  const persistence = persistenceOf(observed);
  if (persistence === 'none') {
    warnings.push(
      'REDIS_URL: Redis keeps nothing on disk (appendonly no, no save points): a restart of Redis loses queued wake-ups and leases; the inbox in PostgreSQL keeps the inputs, but enable appendonly yes for production',
    );
  } else if (persistence === 'unknown') {
    warnings.push(
      "REDIS_URL: Redis's persistence could not be checked (CONFIG is refused and INFO shows appendonly off but not the save points): without persistence a restart of Redis loses queued wake-ups and leases; make sure appendonly yes is set for production",
    );
  }
  return { maxmemoryPolicy, persistence, version, warnings };
}

/** Reads the settings: CONFIG GET first, INFO for what CONFIG did not give. */
async function observe(redis: Redis): Promise<Observed> {
  const server = parseInfo(await redis.info('server'));
  const config = await readConfig(redis);
  const observed: Observed = {
    version: server.get('redis_version'),
    mode: server.get('redis_mode'),
    ...config,
  };
  if (observed.policy === undefined) {
    observed.policy = parseInfo(await redis.info('memory')).get('maxmemory_policy');
  }
  if (observed.aof === undefined) {
    const enabled = parseInfo(await redis.info('persistence')).get('aof_enabled');
    if (enabled !== undefined) observed.aof = enabled === '1';
  }
  return observed;
}

/**
 * CONFIG GET of the three settings; a setting Redis does not return stays `undefined`, and all
 * do when CONFIG is refused (an error reply: renamed, unknown or forbidden by ACL).
 */
async function readConfig(redis: Redis): Promise<Pick<Observed, 'policy' | 'aof' | 'save'>> {
  const get = async (name: string): Promise<string | undefined> => {
    const reply = await redis.config('GET', name);
    return Array.isArray(reply) && reply.length >= 2 ? String(reply[1]) : undefined;
  };
  try {
    const [policy, appendonly, save] = await Promise.all(
      ['maxmemory-policy', 'appendonly', 'save'].map(get),
    );
    return { policy, aof: appendonly === undefined ? undefined : appendonly === 'yes', save };
  } catch (error) {
    if ((error as Error | undefined)?.name === 'ReplyError') return {};
    throw error;
  }
}

/** `key:value` lines of an INFO reply (section headers and blank lines skipped). */
function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** The version, or an error when below {@link MIN_VERSION}; unreadable is a warning. */
function checkVersion(version: string | undefined, warnings: string[]): string {
  const match = /^(\d+)\.(\d+)/.exec(version ?? '');
  if (!match) {
    warnings.push(
      `REDIS_URL: Redis's version could not be read (INFO server gave redis_version ${JSON.stringify(version ?? null)}): distributed mode needs Redis 6.2 or newer`,
    );
    return version ?? 'unknown';
  }
  const [major, minor] = [Number(match[1]), Number(match[2])];
  if (major < MIN_VERSION[0] || (major === MIN_VERSION[0] && minor < MIN_VERSION[1])) {
    throw new RedisSettingsError(
      'version',
      `Redis is version ${version}; distributed mode needs ${MIN_VERSION.join('.')} or newer (its scripts and BullMQ need it): upgrade Redis`,
    );
  }
  return version as string;
}

/** The policy, or an error when it is not `noeviction`; unreadable is a warning. */
function checkPolicy(policy: string | undefined, warnings: string[]): string {
  if (policy === undefined) {
    warnings.push(
      "REDIS_URL: Redis's maxmemory-policy could not be read (CONFIG is refused and INFO memory does not show it): distributed mode needs noeviction (leases and queued work must never be evicted)",
    );
    return 'unknown';
  }
  if (policy !== 'noeviction') {
    throw new RedisSettingsError(
      'maxmemory-policy',
      `Redis's maxmemory-policy is ${policy}; distributed mode needs noeviction (leases and queued work must never be evicted): set maxmemory-policy noeviction`,
    );
  }
  return policy;
}

/** What Redis keeps on disk: AOF wins; save points are only known from CONFIG. */
function persistenceOf(observed: Observed): RedisSettingsReport['persistence'] {
  if (observed.aof === true) return 'aof';
  if (observed.aof === undefined || observed.save === undefined) return 'unknown';
  return observed.save.trim() === '' ? 'none' : 'rdb';
}
