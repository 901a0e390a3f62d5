import type Redis from 'ioredis';
import type { EventRelay, RelayedEvent, RelayedLatestTurn } from '../event-relay';
import { RedisKeys } from './redis-keys';

/** How long an ended turn's log is kept (ms): the replay TTL. */
const ENDED_TTL_MS = 60_000;
/** How long a running turn's log is kept past its last event (ms). */
const RUNNING_TTL_MS = 30 * 60_000;
/** Most entries (batches of events) a turn's log keeps: its last ones. */
const MAX_ENTRIES = 10_000;
/** Least time between two warnings of failed publishing (ms). */
const WARN_EVERY_MS = 10_000;

/** Bounds and identity of a {@link RedisEventRelay}. */
export interface RedisEventRelayOptions {
  prefix: string;
  instanceId: string;
  /** @default 60000 */
  endedTtlMs?: number;
  /** @default 1800000 */
  runningTtlMs?: number;
  /** @default 10000 */
  maxEntries?: number;
  /** Told (at most every 10 s) when Redis refused a batch. */
  warn?: (message: string) => void;
}

/** One published message: the events of one batch of one instance, in order. */
interface RelayMessage {
  o: string;
  e: RelayedEvent[];
}

const isTurnEnd = ({ name, event }: RelayedEvent) =>
  name === 'agent:turn:end' || (name === 'outbound:stream' && (event as { done?: boolean }).done);

/**
 * The {@link EventRelay} over Redis: one pub/sub channel (`<prefix>:events`) that every instance
 * reads with a connection of its own, and a Redis stream per turn (`<prefix>:turnlog:<turnId>`:
 * its stream's events and usage reports, one entry per batch, at most `maxEntries`) kept `runningTtlMs` past its last event while the
 * turn runs and `endedTtlMs` after its end. Each batch is one pipeline: the logs' entries and
 * expiries, the sessions' latest turns, then the message; so an event a subscriber has received
 * is in its turn's log already. Publishing never waits for Redis and never throws: an event
 * Redis refused is lost for the other instances (this one has delivered it) and a warning says so.
 */
export class RedisEventRelay implements EventRelay {
  private readonly keys: RedisKeys;
  private readonly listeners = new Set<(item: RelayedEvent) => void>();
  private readonly sources = new Map<string, string | undefined>();
  private batch: RelayedEvent[] = [];
  private scheduled?: NodeJS.Immediate;
  private sending: Promise<void> = Promise.resolve();
  private subscriber?: Redis;
  private warnedAt = 0;
  private readonly endedTtl: number;
  private readonly runningTtl: number;
  private readonly maxEntries: number;

  constructor(
    private readonly redis: Redis,
    private readonly options: RedisEventRelayOptions,
  ) {
    this.keys = new RedisKeys(options.prefix);
    this.endedTtl = options.endedTtlMs ?? ENDED_TTL_MS;
    this.runningTtl = options.runningTtlMs ?? RUNNING_TTL_MS;
    this.maxEntries = options.maxEntries ?? MAX_ENTRIES;
  }

  /** Subscribes to the other instances' events. */
  async start(): Promise<void> {
    // A subscriber waits for Redis (the command client fails at once instead; see runtime).
    const subscriber = this.redis.duplicate({ enableOfflineQueue: true });
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, text: string) => this.receive(text));
    await subscriber.subscribe(this.keys.events());
  }

  publish(name: string, event: RelayedEvent['event']): void {
    this.batch.push({ name, event });
    this.scheduled ??= setImmediate(() => void this.send());
  }

  onRemote(listener: (item: RelayedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async turnLog(turnId: string): Promise<RelayedEvent[]> {
    const entries = await this.redis.xrange(this.keys.turnLog(turnId), '-', '+');
    const events: RelayedEvent[] = [];
    for (const [, fields] of entries) {
      const at = fields.indexOf('e');
      if (at >= 0) events.push(...(JSON.parse(fields[at + 1]) as RelayedEvent[]));
    }
    return events;
  }

  async hasTurn(sessionId: string, turnId: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys.sessionTurns(sessionId), turnId)) === 1;
  }

  async latestTurn(sessionId: string): Promise<RelayedLatestTurn | undefined> {
    const text = await this.redis.get(this.keys.latestTurn(sessionId));
    return text ? (JSON.parse(text) as RelayedLatestTurn) : undefined;
  }

  flush(): Promise<void> {
    return this.send();
  }

  async close(): Promise<void> {
    await this.send();
    await this.subscriber?.quit().catch(() => this.subscriber?.disconnect());
  }

  /** Sends the batch (after the one being sent, so that messages keep their order). */
  private send(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batch = this.batch;
    if (batch.length === 0) return this.sending;
    this.batch = [];
    const forgotten = batch
      .filter((item) => item.name === 'session:deleted')
      .map((item) => item.event.sessionId);
    this.sending = this.sending
      .then(() => this.pipelineOf(batch).exec())
      .then((results) => {
        const failed = results?.find(([error]) => error);
        if (failed?.[0]) throw failed[0];
      })
      .then(() => Promise.all(forgotten.map((sessionId) => this.forget(sessionId))))
      .then(
        () => undefined,
        (error: unknown) => this.warnOnce(error, batch.length),
      );
    return this.sending;
  }

  /** The batch's log entries, expiries and latest turns, then its message. */
  private pipelineOf(batch: RelayedEvent[]) {
    const pipeline = this.redis.pipeline();
    const byTurn = new Map<string, RelayedEvent[]>();
    for (const item of batch) {
      const { turnId, seq } = item.event;
      // A turn's stream, and its usage reports (not numbered: a resume gets the latest).
      if (turnId === undefined || (typeof seq !== 'number' && item.name !== 'token:usage'))
        continue;
      const items = byTurn.get(turnId);
      if (items) items.push(item);
      else byTurn.set(turnId, [item]);
      this.latest(pipeline, item);
    }
    for (const [turnId, items] of byTurn) {
      const key = this.keys.turnLog(turnId);
      pipeline.xadd(key, 'MAXLEN', '~', this.maxEntries, '*', 'e', JSON.stringify(items));
      pipeline.pexpire(key, items.some(isTurnEnd) ? this.endedTtl : this.runningTtl);
      pipeline.pexpire(this.keys.sessionTurns(items[0].event.sessionId), this.runningTtl);
    }
    const message: RelayMessage = { o: this.options.instanceId, e: batch };
    pipeline.publish(this.keys.events(), JSON.stringify(message));
    return pipeline;
  }

  /** Keeps the session's latest turn (and the list of its turns) current. */
  private latest(pipeline: ReturnType<Redis['pipeline']>, { name, event }: RelayedEvent): void {
    const { sessionId, turnId } = event as { sessionId: string; turnId: string };
    if (name === 'agent:turn:start') {
      const source = (event as { source?: string }).source;
      this.sources.set(turnId, source);
      const latest: RelayedLatestTurn = { turnId, source, ended: false };
      pipeline.set(this.keys.latestTurn(sessionId), JSON.stringify(latest), 'PX', this.runningTtl);
      pipeline.sadd(this.keys.sessionTurns(sessionId), turnId);
    } else if (name === 'agent:turn:end') {
      const latest: RelayedLatestTurn = { turnId, source: this.sources.get(turnId), ended: true };
      this.sources.delete(turnId);
      pipeline.set(this.keys.latestTurn(sessionId), JSON.stringify(latest), 'PX', this.endedTtl);
    }
  }

  /** A deleted session: its turns' logs and its latest turn go. */
  private async forget(sessionId: string): Promise<void> {
    const turns = await this.redis.smembers(this.keys.sessionTurns(sessionId));
    await this.redis.del(
      this.keys.latestTurn(sessionId),
      this.keys.sessionTurns(sessionId),
      ...turns.map((turnId) => this.keys.turnLog(turnId)),
    );
  }

  private receive(text: string): void {
    let message: RelayMessage;
    try {
      message = JSON.parse(text) as RelayMessage;
    } catch {
      return;
    }
    if (message.o === this.options.instanceId || !Array.isArray(message.e)) return;
    for (const item of message.e) {
      for (const listener of this.listeners) {
        try {
          listener(item);
        } catch {
          // A listener is an observer: one failing never stops the others.
        }
      }
    }
  }

  private warnOnce(error: unknown, count: number): void {
    const now = Date.now();
    if (now - this.warnedAt < WARN_EVERY_MS) return;
    this.warnedAt = now;
    this.options.warn?.(
      `${count} event(s) did not reach the other instances: ${(error as Error)?.message ?? String(error)}`,
    );
  }
}
