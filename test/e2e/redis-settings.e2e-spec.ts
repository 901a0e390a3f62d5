import Redis from 'ioredis';
import {
  checkRedisSettings,
  RedisSettingsError,
} from '../../src/distribution/redis/redis-settings';
import { describeOwnRedis, RedisInstance } from '../support/redis-instance';

describeOwnRedis('checkRedisSettings on Redis servers of their own', () => {
  let instances: RedisInstance[];
  let clients: Redis[];

  /** A client of an own server started with `args` (both cleaned up in afterEach). */
  async function redisWith(...args: string[]): Promise<Redis> {
    const instance = await RedisInstance.create({ args });
    instances.push(instance);
    const redis = new Redis(instance.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    clients.push(redis);
    return redis;
  }

  /** The error `checkRedisSettings` rejects with (fails the test when it resolves). */
  async function failureOf(redis: Redis): Promise<RedisSettingsError> {
    const error: unknown = await checkRedisSettings(redis).then(
      (report) => new Error(`resolved: ${JSON.stringify(report)}`),
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(RedisSettingsError);
    return error as RedisSettingsError;
  }

  beforeEach(() => {
    instances = [];
    clients = [];
  });

  afterEach(async () => {
    for (const redis of clients) if (redis.status !== 'end') redis.disconnect();
    await Promise.all(instances.map((instance) => instance.remove()));
  });

  it('noeviction with appendonly yes passes without warnings, persistence aof', async () => {
    const redis = await redisWith('--maxmemory-policy', 'noeviction', '--appendonly', 'yes');

    const report = await checkRedisSettings(redis);

    expect(report).toEqual({
      maxmemoryPolicy: 'noeviction',
      persistence: 'aof',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      warnings: [],
    });
  });

  it('save points without AOF pass without warnings, persistence rdb', async () => {
    const redis = await redisWith('--save', '3600 1');

    const report = await checkRedisSettings(redis);

    expect(report).toMatchObject({ persistence: 'rdb', warnings: [] });
  });

  it('allkeys-lru is refused with one line naming REDIS_URL and maxmemory-policy', async () => {
    const redis = await redisWith('--maxmemory-policy', 'allkeys-lru', '--appendonly', 'yes');

    const error = await failureOf(redis);

    expect(error.setting).toBe('maxmemory-policy');
    expect(error.message).not.toMatch(/\n/);
    expect(error.message).toMatch(/^REDIS_URL: /);
    expect(error.message).toContain("Redis's maxmemory-policy is allkeys-lru");
    expect(error.message).toContain('set maxmemory-policy noeviction');
  });

  it('no persistence (appendonly no, no save points) passes with one warning', async () => {
    const redis = await redisWith();

    const report = await checkRedisSettings(redis);

    expect(report.persistence).toBe('none');
    expect(report.warnings).toHaveLength(1);
    expect(report.warnings[0]).toMatch(/^REDIS_URL: Redis keeps nothing on disk/);
    expect(report.warnings[0]).toContain('enable appendonly yes');
  });

  it('with CONFIG renamed away it reads INFO and still refuses a bad policy', async () => {
    const redis = await redisWith(
      '--rename-command',
      'CONFIG',
      '',
      '--maxmemory-policy',
      'volatile-lru',
    );
    await expect(redis.config('GET', 'maxmemory-policy')).rejects.toThrow(/unknown command/i);

    const error = await failureOf(redis);

    expect(error.message).toContain("Redis's maxmemory-policy is volatile-lru");
  });

  it('with CONFIG renamed away it reads aof_enabled from INFO, and save points stay unknown', async () => {
    const withAof = await redisWith('--rename-command', 'CONFIG', '', '--appendonly', 'yes');
    const withoutAof = await redisWith('--rename-command', 'CONFIG', '');

    const [aof, unknown] = await Promise.all([withAof, withoutAof].map(checkRedisSettings));

    expect(aof).toMatchObject({ maxmemoryPolicy: 'noeviction', persistence: 'aof', warnings: [] });
    expect(unknown.persistence).toBe('unknown');
    expect(unknown.warnings).toHaveLength(1);
    expect(unknown.warnings[0]).toMatch(/^REDIS_URL: Redis's persistence could not be checked/);
  });

  it('a Redis in cluster mode is refused with one line naming REDIS_URL and the mode', async () => {
    const redis = await redisWith('--cluster-enabled', 'yes', '--appendonly', 'yes');

    const error = await failureOf(redis);

    expect(error.setting).toBe('redis_mode');
    expect(error.message).not.toMatch(/\n/);
    expect(error.message).toMatch(/^REDIS_URL: Redis runs in cluster mode; /);
    expect(error.message).toContain('use a standalone Redis');
  });

  it('a Redis that is down is a connection error, not a settings report', async () => {
    const redis = await redisWith();
    await instances[0].stop({ hard: true });

    await expect(checkRedisSettings(redis)).rejects.not.toBeInstanceOf(RedisSettingsError);
  });
});

describe('checkRedisSettings on a Redis too old', () => {
  it('refuses a version below 6.2 with one line naming REDIS_URL and the version', async () => {
    const old = {
      info: async () => '# Server\r\nredis_version:6.0.16\r\n',
      config: async (_get: string, name: string) => [name, name === 'save' ? '' : 'noeviction'],
    } as unknown as Redis;

    const error: unknown = await checkRedisSettings(old).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RedisSettingsError);
    expect((error as RedisSettingsError).setting).toBe('version');
    expect((error as Error).message).toBe(
      'REDIS_URL: Redis is version 6.0.16; distributed mode needs 6.2 or newer (its scripts and BullMQ need it): upgrade Redis',
    );
  });
});
