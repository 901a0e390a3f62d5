import { pacedRequests } from '../../../src/server';
import type { HttpRequest, HttpResponse } from '../../../src/api';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Sends `count` requests for `path` through the middleware in one go; records the starts. */
function arrive(
  middleware: ReturnType<typeof pacedRequests>,
  count: number,
  started: string[],
  path = '/agent/messages',
  destroyed = () => false,
): void {
  const first = started.length;
  for (let i = 0; i < count; i++) {
    const name = `${path}#${first + i}`;
    const req = {
      path,
      get destroyed() {
        return destroyed();
      },
    } as unknown as HttpRequest;
    middleware(req, {} as HttpResponse, () => started.push(name));
  }
}

describe('pacedRequests (README: REST API, a burst is worked through in chunks)', () => {
  it('a burst starts at most maxPerTurn requests per turn of the event loop, in arrival order', async () => {
    const started: string[] = [];
    const paced = pacedRequests(['/health'], { maxPerTurn: 3, now: () => 0 });

    arrive(paced, 8, started);
    const perTurn = [started.length];
    while (started.length < 8) {
      await nextTurn();
      perTurn.push(started.length - perTurn.reduce((a, b) => a + b, 0));
    }

    expect(perTurn).toEqual([3, 3, 2]);
    expect(started).toEqual(Array.from({ length: 8 }, (_, i) => `/agent/messages#${i}`));
  });

  it('the chunk adapts: a turn slower than the target halves it, a quick one grows it by one', async () => {
    const started: string[] = [];
    let clock = 0;
    let lap = 25;
    const paced = pacedRequests([], { maxPerTurn: 8, targetMs: 10, now: () => (clock += lap) });

    arrive(paced, 40, started);
    const perTurn = [started.length];
    for (let turn = 0; turn < 6; turn++) {
      if (turn === 3) lap = 1;
      const before = started.length;
      await nextTurn();
      perTurn.push(started.length - before);
    }

    // 8 at once; slow turns: 4, 2, 1; quick turns: 2, 3, 4.
    expect(perTurn).toEqual([8, 4, 2, 1, 2, 3, 4]);
  });

  it('a bypassed path (/health) starts at once, even behind a waiting burst', () => {
    const started: string[] = [];
    const paced = pacedRequests(['/health'], { maxPerTurn: 2, now: () => 0 });

    arrive(paced, 5, started);
    const before = started.length;
    let healthStarted = false;
    paced({ path: '/health' } as HttpRequest, {} as HttpResponse, () => (healthStarted = true));

    expect(before).toBe(2);
    expect(healthStarted).toBe(true);
  });

  it('a request whose client went away while it waited is skipped, not started', async () => {
    const started: string[] = [];
    const paced = pacedRequests([], { maxPerTurn: 1, now: () => 0 });
    let gone = false;

    arrive(paced, 3, started, '/agent/messages', () => gone);
    gone = true;
    await nextTurn();
    await nextTurn();

    expect(started).toEqual(['/agent/messages#0']);
  });

  it('a quiet server starts each request at once', async () => {
    const started: string[] = [];
    const paced = pacedRequests([], { maxPerTurn: 2, now: () => 0 });

    for (let i = 0; i < 4; i++) {
      arrive(paced, 1, started);
      expect(started).toHaveLength(i + 1);
      await nextTurn();
    }
  });
});
