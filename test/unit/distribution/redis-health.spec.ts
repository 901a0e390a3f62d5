import { EventEmitter } from 'node:events';
import type Redis from 'ioredis';
import { StoreUnavailableError } from '../../../src/contracts';
import {
  isConnectionError,
  RedisHealth,
  RedisUnavailableError,
} from '../../../src/distribution/redis/redis-health';

/** A stand-in for an ioredis client: a `status` the test sets, and a PING it answers or not. */
class FakeClient extends EventEmitter {
  status = 'ready';
  ping: () => Promise<string> = () => Promise.resolve('PONG');
}

const asRedis = (client: FakeClient) => client as unknown as Redis;

/** An ioredis-like error of that name (and code). */
function errorNamed(name: string, message: string, code?: string): Error {
  const error = new Error(message) as Error & { code?: string };
  error.name = name;
  if (code) error.code = code;
  return error;
}

describe('RedisUnavailableError', () => {
  it('says in plain words what was not done, is an unavailable store, and carries no stack', () => {
    const cause = new Error('Connection is closed.');
    const error = new RedisUnavailableError('the input was not accepted', { cause });

    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error.name).toBe('RedisUnavailableError');
    expect(error.message).toBe('Redis is unreachable: the input was not accepted');
    expect(error.store).toBe('redis');
    expect(error.stack).toBe(
      'RedisUnavailableError: Redis is unreachable: the input was not accepted',
    );
    expect((error as { cause?: unknown }).cause).toBe(cause);
  });
});

describe('isConnectionError', () => {
  it.each([
    ['a closed connection', new Error('Connection is closed.')],
    [
      'no offline queue',
      new Error("Stream isn't writeable and enableOfflineQueue options is false"),
    ],
    [
      'retries used up',
      errorNamed('MaxRetriesPerRequestError', 'Reached the max retries per request limit'),
    ],
    [
      'a refused connection',
      errorNamed('Error', 'connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED'),
    ],
  ])('%s is an outage', (_what, error) => {
    expect(isConnectionError(error)).toBe(true);
  });

  it.each([
    ['a reply of the server', errorNamed('ReplyError', 'ERR Error running script')],
    ['a reply even when it speaks of connections', errorNamed('ReplyError', 'ERR connect to x')],
    ['a program error', new TypeError('x is not a function')],
    ['not an error', 'Connection is closed.'],
  ])('%s is not', (_what, error) => {
    expect(isConnectionError(error)).toBe(false);
  });
});

describe('RedisHealth', () => {
  let commands: FakeClient;
  let reader: FakeClient | undefined;
  let health: RedisHealth;

  beforeEach(() => {
    commands = new FakeClient();
    reader = new FakeClient();
    health = new RedisHealth(
      [
        { name: 'commands', client: asRedis(commands) },
        { name: 'mailbox reader', client: () => reader && asRedis(reader) },
      ],
      { pingTimeoutMs: 50 },
    );
  });

  afterEach(() => health.stop());

  it('is reachable while every connection is ready and PING answers', async () => {
    await health.ping();

    expect(health.reachable).toBe(true);
    expect(health.report()).toEqual({
      reachable: true,
      connections: { commands: 'ready', 'mailbox reader': 'ready' },
    });
  });

  it('a connection that is not ready makes it unreachable, naming the connection and its state', () => {
    reader!.status = 'reconnecting';
    expect(health.report()).toEqual({
      reachable: false,
      connections: { commands: 'ready', 'mailbox reader': 'reconnecting' },
      message: 'Redis is unreachable (mailbox reader reconnecting)',
    });
    reader = undefined;
    expect(health.report().message).toBe('Redis is unreachable (mailbox reader none)');
  });

  it('a PING without answer in time makes it unreachable until the connection is ready again', async () => {
    commands.ping = () => new Promise(() => undefined); // a frozen server
    await health.ping();

    expect(health.reachable).toBe(false);
    expect(health.report().message).toBe('Redis is unreachable (PING timed out after 50 ms)');

    commands.ping = () => Promise.resolve('PONG');
    commands.emit('ready');
    expect(health.reachable).toBe(true);
  });

  it('guard: runs the operation while reachable; fails at once with RedisUnavailableError when not', async () => {
    await expect(health.guard('the input was not accepted', async () => 7)).resolves.toBe(7);

    commands.status = 'reconnecting';
    const operation = jest.fn(async () => 7);
    await expect(health.guard('the input was not accepted', operation)).rejects.toThrow(
      new RedisUnavailableError('the input was not accepted'),
    );
    expect(operation).not.toHaveBeenCalled();
  });

  it('guard: a connection error becomes RedisUnavailableError with the cause; a reply error passes unchanged', async () => {
    const closed = new Error('Connection is closed.');
    const failed = health.guard('the abort request did not reach', () => Promise.reject(closed));
    await expect(failed).rejects.toMatchObject({
      name: 'RedisUnavailableError',
      message: 'Redis is unreachable: the abort request did not reach',
      cause: closed,
    });

    const reply = errorNamed('ReplyError', 'ERR wrong number of arguments');
    await expect(health.guard('x', () => Promise.reject(reply))).rejects.toBe(reply);
  });

  it('the first connection must be the command client itself', () => {
    expect(() => new RedisHealth([{ name: 'reader', client: () => undefined }])).toThrow(
      /the first connection is the command client itself/,
    );
  });
});
