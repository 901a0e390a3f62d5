import { TurnFeed, type FeedItem } from '../../../../src/api/replay/turn-feed';
import { TurnReplayBuffer } from '../../../../src/api/replay/turn-replay.buffer';

describe('TurnFeed', () => {
  afterEach(() => jest.useRealTimers());

  it('records in the buffer and tells the listeners of that session only, in the same call', () => {
    const feed = new TurnFeed(new TurnReplayBuffer());
    const heard: FeedItem[] = [];
    const stop = feed.listen('a', (item) => {
      // The buffer has the event by the time a listener hears it.
      expect(feed.buffer.replay('a', 't', 0)).toMatchObject({ status: 'ok' });
      heard.push(item);
    });
    feed.listen('a', () => {
      throw new Error('an observer never breaks the turn');
    });
    feed.record('agent:turn:start', { sessionId: 'a', turnId: 't', inputs: [], seq: 1 });
    feed.record('agent:turn:start', { sessionId: 'b', turnId: 'u', inputs: [], seq: 1 });
    feed.queue({ sessionId: 'a', waiting: [] });
    stop();
    feed.record('outbound:stream', { sessionId: 'a', turnId: 't', delta: 'x', seq: 2 });
    expect(heard.map((i) => i.name)).toEqual(['agent:turn:start', 'agent:queue']);
  });

  it("remembers the session's latest turn until the TTL after its end, or its deletion", () => {
    jest.useFakeTimers();
    const feed = new TurnFeed(new TurnReplayBuffer({ ttlMs: 1000 }), 1000);
    feed.record('agent:turn:start', {
      sessionId: 'a',
      turnId: 't',
      source: 'cron',
      inputs: [],
      seq: 1,
    });
    expect(feed.latest('a')).toEqual({ turnId: 't', source: 'cron', ended: false });
    feed.record('agent:turn:end', { sessionId: 'a', turnId: 't', outcome: 'replied', seq: 2 });
    expect(feed.latest('a')).toMatchObject({ ended: true });
    jest.advanceTimersByTime(999);
    expect(feed.latest('a')).toBeDefined();
    jest.advanceTimersByTime(1);
    expect(feed.latest('a')).toBeUndefined();

    feed.record('agent:turn:start', { sessionId: 'a', turnId: 'v', inputs: [], seq: 1 });
    feed.forgetSession('a');
    expect(feed.latest('a')).toBeUndefined();
    expect(feed.buffer.replay('a', 'v', 0)).toEqual({ status: 'unknown' });
    feed.buffer.clear();
  });
});
