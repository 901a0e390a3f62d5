import { distributionHealthOf } from '../../../src/distribution';

const ready = { commands: 'ready', 'mailbox reader': 'ready' };

describe('distributionHealthOf (/health queue part in distributed mode)', () => {
  it('up while Redis is reachable and the wake worker runs (or has not started yet)', () => {
    expect(distributionHealthOf('a', { reachable: true, connections: ready }, 'running')).toEqual({
      up: true,
      instanceId: 'a',
      redis: 'reachable',
      connections: ready,
      worker: 'running',
    });
    expect(
      distributionHealthOf('a', { reachable: true, connections: ready }, 'not started').up,
    ).toBe(true);
  });

  it('down while Redis is unreachable, saying why', () => {
    const redis = {
      reachable: false,
      connections: { commands: 'reconnecting', 'mailbox reader': 'ready' },
      message: 'Redis is unreachable (commands reconnecting)',
    };
    expect(distributionHealthOf('a', redis, 'running')).toEqual({
      up: false,
      instanceId: 'a',
      redis: 'unreachable',
      connections: redis.connections,
      worker: 'running',
      message: 'Redis is unreachable (commands reconnecting)',
    });
  });

  it('down once the wake worker stopped, with both reasons when Redis is away too', () => {
    const reachable = distributionHealthOf('a', { reachable: true, connections: ready }, 'stopped');
    expect(reachable).toMatchObject({ up: false, message: 'the wake worker is not running' });
    const away = { reachable: false, connections: ready, message: 'Redis is unreachable (x)' };
    expect(distributionHealthOf('a', away, 'stopped').message).toBe(
      'Redis is unreachable (x); the wake worker is not running',
    );
  });
});
