import type Redis from 'ioredis';
import type { IncomingMessage } from '../../contracts';
import { parseLeaseValue } from './lease-scripts';
import { RedisKeys } from './redis-keys';

/**
 * An input on its way to the instance that runs its session: the message as the receiving
 * instance's gate made it (after `agent:input:before`), and that instance, to which its
 * settlement goes back.
 */
export interface PendingInput {
  message: IncomingMessage & { id: string };
  /** The instance where the caller waits. */
  origin: string;
}

/** What `PendingInputs.push` learned in the same round trip. */
export interface PushResult {
  /** The instance holding the session's lease now, if any (it is to be told). */
  holder?: string;
  /** Inputs of the session waiting in the list, this one included. */
  length: number;
}

/** How long a session's list lives without a push: inputs nobody took up are in the inbox. */
const LIST_TTL_MS = 24 * 60 * 60 * 1000;

/** RPUSH, refresh the TTL, and read the lease's holder: one round trip. */
const PUSH_SCRIPT = `
local length = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local lease = redis.call('GET', KEYS[2])
return { length, lease or false }
`;

/** LRANGE and DEL at once: what one drain takes is gone for every other. */
const DRAIN_SCRIPT = `
local items = redis.call('LRANGE', KEYS[1], 0, -1)
if #items > 0 then redis.call('DEL', KEYS[1]) end
return items
`;

type Scripted = Redis & {
  agentPendingPush(list: string, lease: string, item: string, ttl: number): Promise<unknown>;
  agentPendingDrain(list: string): Promise<string[]>;
};

/** `text` with Redis glob characters escaped, to match it literally in SCAN MATCH. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/**
 * Per session, the inputs accepted by any instance and not yet taken up by the one that runs the
 * session, in one Redis list: its order is the order in which the instances handed them over,
 * one order for all (S8). The durable record stays the inbox (PostgreSQL); this list only
 * carries the gate's message and its origin, and what it loses (a Redis without persistence
 * restarted) a takeover finds in the inbox.
 */
export class PendingInputs {
  private readonly keys: RedisKeys;
  private readonly redis: Scripted;

  constructor(redis: Redis, prefix: string) {
    this.keys = new RedisKeys(prefix);
    if (!('agentPendingPush' in redis)) {
      redis.defineCommand('agentPendingPush', { numberOfKeys: 2, lua: PUSH_SCRIPT });
      redis.defineCommand('agentPendingDrain', { numberOfKeys: 1, lua: DRAIN_SCRIPT });
    }
    this.redis = redis as Scripted;
  }

  /** Appends the input to its session's list and tells who holds the session now. */
  async push(input: PendingInput): Promise<PushResult> {
    const { sessionId } = input.message;
    const [length, lease] = (await this.redis.agentPendingPush(
      this.keys.pending(sessionId),
      this.keys.lease(sessionId),
      JSON.stringify(input),
      LIST_TTL_MS,
    )) as [number, string | null];
    return lease ? { holder: parseLeaseValue(lease).instanceId, length } : { length };
  }

  /** Takes every input of the session's list, in order (none: an empty list). */
  async drain(sessionId: string): Promise<PendingInput[]> {
    const items = await this.redis.agentPendingDrain(this.keys.pending(sessionId));
    return items.map((item) => JSON.parse(item) as PendingInput);
  }

  /** The sessions with inputs in their list (a SCAN: for clearing all, not for a hot path). */
  async sessions(): Promise<string[]> {
    const head = this.keys.pending('');
    const found = new Set<string>();
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(
        cursor,
        'MATCH',
        `${globEscape(head)}*`,
        'COUNT',
        500,
      );
      cursor = next;
      for (const key of keys) found.add(key.slice(head.length));
    } while (cursor !== '0');
    return [...found];
  }

  /** The ids of the inputs in the session's list, without taking them. */
  async ids(sessionId: string): Promise<string[]> {
    const items = await this.redis.lrange(this.keys.pending(sessionId), 0, -1);
    return items.map((item) => (JSON.parse(item) as PendingInput).message.id);
  }

  /** How many inputs of the session wait in the list. */
  length(sessionId: string): Promise<number> {
    return this.redis.llen(this.keys.pending(sessionId));
  }
}
