import { ApiApp } from '../support/api-app';
import { DRIVER_TEXT, SwitchableStores } from '../support/api-stores';

/**
 * Inputs the agent cannot take now are refused with a reason (hardening): past
 * `AGENT_MAX_WAITING` REST answers 429, while a store is down 503, both with `Retry-After`.
 */
describe('REST: a full waiting list', () => {
  let a: ApiApp;
  afterEach(() => a?.close());

  it('S8: past AGENT_MAX_WAITING a new input gets 429 with Retry-After, with and without wait', async () => {
    a = await ApiApp.start({ env: { AGENT_MAX_WAITING: '1' } });
    a.server.enqueue({ text: 'held', hold: true });
    const post = (content: string, wait = false) =>
      a
        .http()
        .post(`/agent/messages${wait ? '?wait=true' : ''}`)
        .set(a.auth)
        .send({ sessionId: 's', content, source: 'job' });
    expect((await post('running')).status).toBe(202);
    await a.server.nextRequest();
    expect((await post('waits')).status).toBe(202);

    const refused = await post('one too many');
    const waited = await post('one too many, waiting', true);

    for (const res of [refused, waited]) {
      expect(res.status).toBe(429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    a.server.release();
  });

  it('S1: while the store is down a new input gets 503 with Retry-After naming the store, with and without wait', async () => {
    const stores = new SwitchableStores();
    a = await ApiApp.start({ override: stores.override });
    stores.mode = 'fail';
    const post = (wait: boolean) =>
      a
        .http()
        .post(`/agent/messages${wait ? '?wait=true' : ''}`)
        .set(a.auth)
        .send({ sessionId: 's', content: 'hello' });

    for (const res of [await post(false), await post(true)]) {
      expect(res.status).toBe(503);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(JSON.stringify(res.body)).not.toContain(DRIVER_TEXT);
    }
    stores.mode = 'ok';
    expect((await post(false)).status).toBe(202);
  });
});
