import type Redis from 'ioredis';
import { RedisKeys } from '../../src/distribution/redis/redis-keys';
import { RemoteView, type RemoteSessionState } from '../../src/distribution/redis/remote-view';
import { waitFor } from '../support/distributed-apps';
import { deletePrefix, describeRedis, testPrefix, testRedis } from '../support/redis-test';

/**
 * Every instance's view of the sessions the others run (the synchronous answers of S3 and S8
 * across instances), on a real Redis: a holder's changes reach the other instances and the hash
 * a starting instance reads; an instance that lost a session's lease (a pause longer than a
 * lease, Redis away) and whose lane still runs can no longer overwrite what the new holder
 * published.
 */
describeRedis('the session view across instances (Redis)', () => {
  let prefix: string;
  let keys: RedisKeys;
  let redis: Redis;
  const views: RemoteView[] = [];

  const viewOf = async (instanceId: string) => {
    const view = new RemoteView(redis, { prefix, instanceId });
    views.push(view);
    await view.start();
    return view;
  };
  const running = (turnId: string) => ({ runningTurn: turnId, waiting: [] });
  const hashed = async (sessionId: string) => {
    const text = await redis.hget(`${prefix}:view`, sessionId);
    return text === null ? undefined : (JSON.parse(text) as RemoteSessionState);
  };
  /** Publishes a marker session from `from` and waits until `observer` heard it: all before it arrived too. */
  let markers = 0;
  const heardAll = async (from: RemoteView, observer: RemoteView) => {
    const marker = `marker-${++markers}`;
    await from.publish([{ sessionId: marker, state: running('m') }]);
    await waitFor(() => observer.get(marker) !== undefined, `${marker} to arrive`);
  };

  beforeEach(() => {
    prefix = testPrefix();
    keys = new RedisKeys(prefix);
    redis = testRedis();
  });

  afterEach(async () => {
    for (const view of views.splice(0)) await view.close();
    await redis.quit();
    await deletePrefix(prefix);
  });

  it("S3: the holder's turn start and end reach the other instances and the hash; an instance started later reads what runs", async () => {
    const a = await viewOf('a');
    const c = await viewOf('c');
    await redis.set(keys.lease('s'), 'a|1', 'PX', 10_000);
    expect(await a.publish([{ sessionId: 's', state: running('t1') }])).toBe(1);
    await heardAll(a, c);
    expect(c.get('s')).toEqual({ holder: 'a', runningTurn: 't1', waiting: [] });
    expect(a.get('s')).toBeUndefined(); // its own sessions are not in its view of the others
    expect(await hashed('s')).toEqual({ holder: 'a', runningTurn: 't1', waiting: [] });
    const late = await viewOf('d');
    expect(late.get('s')).toEqual({ holder: 'a', runningTurn: 't1', waiting: [] });

    expect(await a.publish([{ sessionId: 's', state: null }])).toBe(1);
    await heardAll(a, c);
    expect(c.get('s')).toBeUndefined();
    expect(await hashed('s')).toBeUndefined();
  });

  it('S3: an instance that lost the lease publishes nothing over the new holder: its late turn start and end change no view and not the hash', async () => {
    const a = await viewOf('a');
    const b = await viewOf('b');
    const c = await viewOf('c');
    await redis.set(keys.lease('s'), 'a|1', 'PX', 10_000);
    await a.publish([{ sessionId: 's', state: running('t1') }]);
    // a's lease ran out while it was paused; b took the session over and runs its own turn.
    await redis.set(keys.lease('s'), 'b|2', 'PX', 10_000);
    expect(await b.publish([{ sessionId: 's', state: running('t2') }])).toBe(1);
    // a goes on: its lane ends the old turn and opens one for an input it still had.
    expect(await a.publish([{ sessionId: 's', state: running('t3') }])).toBe(0);
    expect(await a.publish([{ sessionId: 's', state: null }])).toBe(0);
    await heardAll(b, c);
    expect(c.get('s')).toEqual({ holder: 'b', runningTurn: 't2', waiting: [] });
    expect(await hashed('s')).toEqual({ holder: 'b', runningTurn: 't2', waiting: [] });
    // A batch goes out for the sessions a still holds, not for the one it lost.
    await redis.set(keys.lease('kept'), 'a|7', 'PX', 10_000);
    expect(
      await a.publish([
        { sessionId: 's', state: null },
        { sessionId: 'kept', state: running('k1') },
      ]),
    ).toBe(1);
    await heardAll(a, c);
    expect(c.get('kept')).toEqual({ holder: 'a', runningTurn: 'k1', waiting: [] });
    expect(c.get('s')).toEqual({ holder: 'b', runningTurn: 't2', waiting: [] });
  });

  it("a session whose lease nobody holds (let go, or lost with nobody taking it over) is published: its holder's last word is what ran", async () => {
    const a = await viewOf('a');
    const c = await viewOf('c');
    expect(await a.publish([{ sessionId: 's', state: running('t1') }])).toBe(1);
    await heardAll(a, c);
    expect(c.get('s')).toEqual({ holder: 'a', runningTurn: 't1', waiting: [] });
    expect(await a.publish([{ sessionId: 's', state: null }])).toBe(1);
    await heardAll(a, c);
    expect(c.get('s')).toBeUndefined();
  });

  it('an instance id containing the separator is matched whole: "a" does not pass for "a|1"', async () => {
    const a = await viewOf('a');
    await redis.set(keys.lease('s'), 'a|1|5', 'PX', 10_000); // held by the instance "a|1"
    expect(await a.publish([{ sessionId: 's', state: running('t1') }])).toBe(0);
    expect(await hashed('s')).toBeUndefined();
  });
});
