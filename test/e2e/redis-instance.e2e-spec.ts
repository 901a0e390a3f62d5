import { existsSync } from 'node:fs';
import Redis from 'ioredis';
import { describeOwnRedis, RedisInstance } from '../support/redis-instance';

describeOwnRedis('RedisInstance: a Redis server of a test of its own', () => {
  let instances: RedisInstance[];
  let clients: Redis[];

  /** An own server, removed in afterEach. */
  async function own(args?: string[]): Promise<RedisInstance> {
    const instance = await RedisInstance.create({ args });
    instances.push(instance);
    return instance;
  }

  /** A client that neither retries nor queues, so a dead or frozen server shows at once. */
  function client(instance: RedisInstance, commandTimeout?: number): Redis {
    const redis = new Redis(instance.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      lazyConnect: true,
      commandTimeout,
    });
    clients.push(redis);
    return redis;
  }

  beforeEach(() => {
    instances = [];
    clients = [];
  });

  afterEach(async () => {
    // A client whose server died has ended already (disconnecting it again leaves a timer).
    for (const redis of clients) if (redis.status !== 'end') redis.disconnect();
    await Promise.all(instances.map((instance) => instance.remove()));
  });

  it('starts on a loopback port of its own and answers PING, with the defaults in place', async () => {
    const instance = await own();
    const redis = client(instance);
    await redis.connect();

    expect(instance.url).toBe(`redis://127.0.0.1:${instance.port}`);
    expect(instance.port).not.toBe(6379);
    expect(await redis.ping()).toBe('PONG');
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    expect(await redis.config('GET', 'save')).toEqual(['save', '']);
    expect(await redis.config('GET', 'dir')).toEqual(['dir', instance.dir]);
  });

  it('args replace the defaults they name and add the others', async () => {
    const instance = await own(['--appendonly', 'yes', '--maxmemory-policy', 'allkeys-lru']);
    const redis = client(instance);
    await redis.connect();

    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await redis.config('GET', 'maxmemory-policy')).toEqual([
      'maxmemory-policy',
      'allkeys-lru',
    ]);
    expect(await redis.config('GET', 'save')).toEqual(['save', '']);
  });

  it('a restart keeps the port and the server answers again', async () => {
    const instance = await own();
    const port = instance.port;
    await instance.stop();
    expect(instance.running).toBe(false);

    await instance.start();
    const redis = client(instance);
    await redis.connect();

    expect(instance.port).toBe(port);
    expect(await redis.ping()).toBe('PONG');
  });

  it('a hard stop makes a connected client fail its next command', async () => {
    const instance = await own();
    const redis = client(instance);
    await redis.connect();
    expect(await redis.ping()).toBe('PONG');

    await instance.stop({ hard: true });

    expect(instance.running).toBe(false);
    await expect(redis.ping()).rejects.toThrow();
  });

  it('a frozen server leaves PING unanswered until it is thawed', async () => {
    const instance = await own();
    const redis = client(instance, 300);
    await redis.connect();

    instance.freeze();
    await expect(redis.ping()).rejects.toThrow(/timed out/i);

    instance.thaw();
    expect(await redis.ping()).toBe('PONG');
  });

  it('remove stops the server and deletes its directory, and is safe twice', async () => {
    const instance = await own();
    expect(existsSync(instance.dir)).toBe(true);

    await instance.remove();
    await instance.remove();

    expect(instance.running).toBe(false);
    expect(existsSync(instance.dir)).toBe(false);
  });

  it('a soft stop ends a server whose SHUTDOWN is renamed away (SIGTERM), and a frozen one', async () => {
    const renamed = await own(['--rename-command', 'SHUTDOWN', '']);
    const frozen = await own();
    frozen.freeze();

    await Promise.all([renamed.stop(), frozen.stop()]);

    expect([renamed.running, frozen.running]).toEqual([false, false]);
  });

  it('a start that cannot succeed fails with what Redis said', async () => {
    await expect(RedisInstance.create({ args: ['--no-such-option', 'x'] })).rejects.toThrow(
      /did not answer PING: .*no-such-option/i,
    );
  });
});
