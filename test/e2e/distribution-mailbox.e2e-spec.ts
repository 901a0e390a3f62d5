import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import {
  InstanceMailbox,
  MailboxClosedError,
  MailboxRequestError,
  MailboxTimeoutError,
  type InstanceMailboxOptions,
  type MailboxEnvelope,
} from '../../src/distribution/redis/instance-mailbox';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { Deferred } from '../support/deferred';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/** Envelopes a handler received, and a promise for the moment it has received `count`. */
function collect(mailbox: InstanceMailbox, type: string, count: number) {
  const received: MailboxEnvelope[] = [];
  const all = new Deferred<MailboxEnvelope[]>();
  mailbox.on(type, (envelope) => {
    received.push(envelope);
    if (received.length === count) all.resolve(received);
  });
  return { received, all: all.promise };
}

/** The CLIENT LIST ids of the connections named `name`. */
async function clientIds(admin: Redis, name: string): Promise<string[]> {
  const list = (await admin.client('LIST')) as string;
  return list
    .split('\n')
    .filter((line) => line.split(' ').includes(`name=${name}`))
    .map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1] ?? '');
}

describeRedis('InstanceMailbox on a Redis stream', () => {
  let prefix: string;
  let admin: Redis;
  let clients: Redis[];
  let mailboxes: InstanceMailbox[];
  let logError: jest.SpyInstance;
  let logWarn: jest.SpyInstance;

  const mailbox = (instanceId: string, options: Partial<InstanceMailboxOptions> = {}) => {
    const redis = testRedis();
    clients.push(redis);
    const created = new InstanceMailbox(redis, { prefix, instanceId, blockMs: 1000, ...options });
    mailboxes.push(created);
    return created;
  };
  const started = async (instanceId: string, options?: Partial<InstanceMailboxOptions>) => {
    const created = mailbox(instanceId, options);
    await created.start();
    return created;
  };

  beforeEach(() => {
    prefix = testPrefix();
    admin = testRedis();
    clients = [admin];
    mailboxes = [];
    logError = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    logWarn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(async () => {
    await Promise.all(mailboxes.map((m) => m.close()));
    await Promise.all(clients.map((c) => c.quit()));
    await deletePrefix(prefix);
    jest.restoreAllMocks();
  });

  it('delivers messages in order with their sender and bodies intact', async () => {
    const a = mailbox('A');
    const b = await started('B');
    const { all } = collect(b, 'note', 3);
    const tricky = { text: 'she said "hi"\nthen \\left\ttab — ünïcödé 日本語 🎉', n: [1, null] };
    await a.send('B', 'note', 'first');
    await a.send('B', 'note', tricky);
    await a.send('B', 'note', { third: true });

    const received = await all;
    expect(received.map((e) => e.body)).toEqual(['first', tricky, { third: true }]);
    expect(received.map((e) => [e.from, e.type])).toEqual(Array(3).fill(['A', 'note']));
    expect(received.every((e) => /^\d+-\d+$/.test(e.id))).toBe(true);
  });

  it("resolves a request with the receiver handler's return value", async () => {
    const a = await started('A');
    const b = await started('B');
    b.on('assignModel', async ({ body, from }) => ({
      assigned: (body as { model: string }).model,
      from,
    }));

    await expect(a.request('B', 'assignModel', { model: 'm-1' }, 5000)).resolves.toEqual({
      assigned: 'm-1',
      from: 'A',
    });
  });

  it("rejects a request with the receiver's error, and the receiver keeps handling", async () => {
    const a = await started('A');
    const b = await started('B');
    b.on('abort', () => {
      throw new Error('no such session: "S1"');
    });
    b.on('clear', () => Promise.reject(new Error('clearing refused')));
    b.on('ping', () => 'pong');

    const thrown = await a
      .request('B', 'abort', { sessionId: 'S1' }, 5000)
      .catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(MailboxRequestError);
    expect(thrown).toMatchObject({ message: 'no such session: "S1"', type: 'abort', target: 'B' });
    await expect(a.request('B', 'clear', {}, 5000)).rejects.toThrow('clearing refused');
    expect(logError).toHaveBeenCalledWith(expect.stringContaining("'abort'"));
    await expect(a.request('B', 'ping', {}, 5000)).resolves.toBe('pong');
  });

  it('answers a request of a type without handler with an error, before its timeout', async () => {
    const a = await started('A');
    await started('B');

    const thrown = await a.request('B', 'delete', {}, 30_000).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(MailboxRequestError);
    expect((thrown as Error).message).toContain("no handler for 'delete'");
  });

  it('times a request out, naming the target, when no instance reads its mailbox', async () => {
    const a = await started('A');
    const began = Date.now();

    const thrown = await a.request('gone', 'abort', {}, 300).catch((e: unknown) => e);
    const elapsed = Date.now() - began;
    expect(thrown).toBeInstanceOf(MailboxTimeoutError);
    expect(thrown).toMatchObject({ target: 'gone', type: 'abort', timeoutMs: 300 });
    expect((thrown as Error).message).toContain("'gone'");
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(1500);
  });

  it('gives each of 200 concurrent requests its own answer, even answered in reverse', async () => {
    const a = await started('A');
    const b = await started('B');
    const gates: Deferred<void>[] = [];
    const allArrived = new Deferred<void>();
    b.on('double', async ({ body }) => {
      const gate = new Deferred<void>();
      gates.push(gate);
      if (gates.length === 200) allArrived.resolve();
      await gate.promise;
      return (body as { n: number }).n * 2;
    });

    const answers = Promise.all(
      Array.from({ length: 200 }, (_, n) => a.request<number>('B', 'double', { n }, 10_000)),
    );
    await allArrived.promise;
    for (const gate of [...gates].reverse()) gate.resolve();
    expect(await answers).toEqual(Array.from({ length: 200 }, (_, n) => n * 2));
  });

  it('does not hold up the answer to its own request while a slow handler runs', async () => {
    const a = await started('A');
    const b = await started('B');
    const slowCalled = new Deferred<void>();
    const release = new Deferred<void>();
    let slowDone = false;
    a.on('slow', async () => {
      slowCalled.resolve();
      await release.promise;
      slowDone = true;
    });
    b.on('ping', () => 'pong');

    await b.send('A', 'slow', {});
    await slowCalled.promise;
    await expect(a.request('B', 'ping', {}, 5000)).resolves.toBe('pong');
    expect(slowDone).toBe(false);
    release.resolve();
  });

  it('does not deliver what was sent before start(), and delivers what is sent after', async () => {
    const a = mailbox('A');
    const b = mailbox('B');
    const { received, all } = collect(b, 'note', 1);
    await a.send('B', 'note', 'before');
    await b.start();
    await a.send('B', 'note', 'after');

    expect((await all).map((e) => e.body)).toEqual(['after']);
    expect(received).toHaveLength(1);
  });

  it('removes handled entries from the stream', async () => {
    const a = await started('A');
    const b = await started('B');
    const { all } = collect(b, 'note', 50);
    b.on('ping', () => 'pong');
    for (let i = 0; i < 50; i++) await a.send('B', 'note', i);
    await all;
    // The answer is written after the deletes were issued, on the same connection.
    await a.request('B', 'ping', {}, 5000);

    expect(await admin.xlen(new RedisKeys(prefix).mailbox('B'))).toBeLessThanOrEqual(1);
  });

  it('close() rejects a pending request, and its loop handles nothing afterwards', async () => {
    const a = await started('A');
    const b = await started('B');
    const hangCalled = new Deferred<void>();
    const release = new Deferred<void>();
    b.on('hang', async () => {
      hangCalled.resolve();
      await release.promise;
    });
    const { received: lateNotes } = collect(a, 'note', 1);
    const pending = a.request('B', 'hang', {}, 30_000).catch((e: unknown) => e);
    await hangCalled.promise;

    await a.close();
    const thrown = await pending;
    expect(thrown).toBeInstanceOf(MailboxClosedError);
    expect((thrown as Error).message).toMatch(/closed before instance 'B' answered request 'hang'/);
    await expect(a.close()).resolves.toBeUndefined();
    await expect(a.send('B', 'note', {})).rejects.toThrow(/closed/);
    expect(await clientIds(admin, a.readerName)).toEqual([]);

    // Another reader of A's mailbox gets the next note; the closed one does not.
    const successor = mailbox('A');
    const { all } = collect(successor, 'note', 1);
    await successor.start();
    await b.send('A', 'note', 'after close');
    expect((await all).map((e) => e.body)).toEqual(['after close']);
    expect(lateNotes).toEqual([]);
    release.resolve();
  });

  it('sets a TTL on the target stream with every send', async () => {
    const a = mailbox('A');
    const short = mailbox('S', { ttlMs: 60_000 });
    const keys = new RedisKeys(prefix);
    await a.send('B', 'note', {});
    await short.send('C', 'note', {});

    const dayMs = 24 * 60 * 60 * 1000;
    expect(await admin.pttl(keys.mailbox('B'))).toBeGreaterThan(dayMs - 60_000);
    expect(await admin.pttl(keys.mailbox('B'))).toBeLessThanOrEqual(dayMs);
    expect(await admin.pttl(keys.mailbox('C'))).toBeGreaterThan(0);
    expect(await admin.pttl(keys.mailbox('C'))).toBeLessThanOrEqual(60_000);
  });

  it('keeps reading after its blocking connection is killed', async () => {
    const a = mailbox('A');
    const b = await started('B');
    const { all } = collect(b, 'note', 1);
    const [before] = await clientIds(admin, b.readerName);
    expect(before).toBeDefined();

    expect(await admin.client('KILL', 'ID', before)).toBe(1);
    await a.send('B', 'note', 'after kill');
    expect((await all).map((e) => e.body)).toEqual(['after kill']);
    const after = await clientIds(admin, b.readerName);
    expect(after).toHaveLength(1);
    expect(after).not.toContain(before);
  });

  it('retries a failing read with a growing backoff and reads on once it works', async () => {
    const a = mailbox('A');
    const b = await started('B', { blockMs: 100 });
    const { all } = collect(b, 'note', 1);
    const retries: string[] = [];
    const twoRetries = new Deferred<void>();
    logWarn.mockImplementation((message: string) => {
      if (!message.includes('retry in')) return;
      retries.push(message);
      if (retries.length === 2) twoRetries.resolve();
    });
    const key = new RedisKeys(prefix).mailbox('B');
    await admin.set(key, 'not a stream');

    await twoRetries.promise;
    expect(retries[0]).toMatch(/WRONGTYPE.*retry in 100 ms/);
    expect(retries[1]).toMatch(/retry in 200 ms/);
    await admin.del(key);
    await a.send('B', 'note', 'after repair');
    expect((await all).map((e) => e.body)).toEqual(['after repair']);
  });

  it('refuses a second handler for a type, naming it', () => {
    const b = mailbox('B');
    b.on('abort', () => undefined);
    expect(() => b.on('abort', () => undefined)).toThrow(/'abort'/);
  });
});
