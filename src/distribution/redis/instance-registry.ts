import type Redis from 'ioredis';
import { RedisKeys } from './redis-keys';

/** Options of {@link InstanceRegistry}. */
export interface InstanceRegistryOptions {
  prefix: string;
  instanceId: string;
  /** How often this instance says it is alive (ms). */
  beatEveryMs: number;
  /** An instance not heard of for this long (ms) counts as gone. */
  goneAfterMs: number;
  now?: () => number;
}

/**
 * The live instances of a deployment, in one Redis hash (instance id -> time of its last
 * heartbeat): whom a hold is told to, and whose holds may be forgotten because it is gone.
 */
export class InstanceRegistry {
  private readonly key: string;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly options: InstanceRegistryOptions,
  ) {
    this.key = new RedisKeys(options.prefix).instances();
    this.now = options.now ?? Date.now;
  }

  /** Says this instance is alive now. */
  async beat(): Promise<void> {
    await this.redis.hset(this.key, this.options.instanceId, this.now());
  }

  /** Beats now and then every `beatEveryMs`; `onBeat` runs after each timed beat. */
  async start(onBeat?: () => void): Promise<void> {
    await this.beat();
    this.timer ??= setInterval(() => {
      this.beat()
        .then(() => onBeat?.())
        .catch(() => undefined); // Redis away: the next beat tries again
    }, this.options.beatEveryMs);
    this.timer.unref();
  }

  /** Stops beating and removes this instance from the hash (a clean exit). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.redis.hdel(this.key, this.options.instanceId).catch(() => 0);
  }

  /** The instances heard of within `goneAfterMs`; those gone longer are removed. */
  async live(): Promise<string[]> {
    const beats = await this.redis.hgetall(this.key);
    const oldest = this.now() - this.options.goneAfterMs;
    const live: string[] = [];
    const gone: string[] = [];
    for (const [id, at] of Object.entries(beats)) (Number(at) >= oldest ? live : gone).push(id);
    if (gone.length) await this.redis.hdel(this.key, ...gone);
    return live.sort();
  }
}
