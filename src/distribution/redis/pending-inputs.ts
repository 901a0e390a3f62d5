import type Redis from 'ioredis';
import type { IncomingMessage } from '../../contracts';
import { leaseValue, parseLeaseValue } from './lease-scripts';
import { type Letter, MESSAGE_FIELD } from './mailbox-wire';
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
  /** Whether the holder, another instance, was told already (the push's letter is in its mailbox). */
  poked: boolean;
  /**
   * The session's lease, granted to the pusher in the same round trip (asked for, and nobody
   * held the session): its fence, and whether the grant before it was let go cleanly.
   */
  granted?: { fence: number; clean: boolean };
}

/** How long a session's list lives without a push: inputs nobody took up are in the inbox. */
const LIST_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * RPUSH, refresh the TTL, read the lease's holder and, when the holder is another instance than
 * the pusher (ARGV[3]) and a letter is given (ARGV[4] the mailbox keys' head, then the entry's
 * field and data, the stream's MAXLEN and TTL), post the letter to the holder's mailbox (the
 * mailbox key is made here, from the holder found: Redis without cluster only). When nobody
 * holds the session and ARGV[9] (a lease length) is given, grant the lease to the pusher as the
 * acquire script does (KEYS fence and released; lease-scripts.ts) and add the session (ARGV[10])
 * to the direct set, scored by the time (Redis' clock, ms) its lease runs out: one round trip.
 */
const PUSH_SCRIPT = `
local length = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local lease = redis.call('GET', KEYS[2])
local poked = 0
if lease and ARGV[4] ~= '' then
  local holder = string.match(lease, '^(.*)|%d+$')
  if holder and holder ~= ARGV[3] then
    local box = ARGV[4] .. holder
    redis.call('XADD', box, 'MAXLEN', '~', ARGV[7], '*', ARGV[5], ARGV[6])
    redis.call('PEXPIRE', box, ARGV[8])
    poked = 1
  end
end
if not lease and ARGV[9] ~= '' then
  local f = redis.call('INCR', KEYS[3])
  local clean = 0
  if redis.call('GET', KEYS[4]) == tostring(f - 1) then clean = 1 end
  redis.call('SET', KEYS[2], ARGV[3] .. '|' .. f, 'PX', ARGV[9])
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[5], t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[9], ARGV[10])
  return { length, false, 0, f, clean }
end
return { length, lease or false, poked }
`;

/** The letter's arguments of a push without one. */
const NO_LETTER = ['', '', '', '', ''];

/**
 * LRANGE and DEL at once, by the session's holder only (KEYS[2], its lease, must hold ARGV[1]):
 * what one drain takes is gone for every other, and an instance whose lease ran out (a paused
 * holder that has not noticed yet) takes nothing that the next holder must run. Nil: not held.
 */
const DRAIN_SCRIPT = `
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return false end
local items = redis.call('LRANGE', KEYS[1], 0, -1)
if #items > 0 then redis.call('DEL', KEYS[1]) end
return items
`;

type Scripted = Redis & {
  agentPendingPush(...keysThenArgs: (string | number)[]): Promise<unknown>;
  agentPendingDrain(list: string, lease: string, holder: string): Promise<string[] | null>;
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
      redis.defineCommand('agentPendingPush', { numberOfKeys: 5, lua: PUSH_SCRIPT });
      redis.defineCommand('agentPendingDrain', { numberOfKeys: 2, lua: DRAIN_SCRIPT });
    }
    this.redis = redis as Scripted;
  }

  /**
   * Appends the input to its session's list and tells who holds the session now. With `poke`
   * (a letter of the input's origin, `InstanceMailbox.letter`), a holder other than the origin
   * gets the letter in its mailbox in the same round trip. With `takeForMs`, a session nobody
   * holds is leased to the origin for that long (`granted`; `SessionLeases.adopt` records it).
   */
  async push(input: PendingInput, poke?: Letter, takeForMs?: number): Promise<PushResult> {
    const { sessionId } = input.message;
    const { keys } = this;
    const letter = poke
      ? [poke.head, MESSAGE_FIELD, poke.data, poke.maxLen, poke.ttlMs]
      : NO_LETTER;
    const [length, lease, poked, fence, clean] = (await this.redis.agentPendingPush(
      keys.pending(sessionId),
      keys.lease(sessionId),
      keys.fence(sessionId),
      keys.released(sessionId),
      keys.direct(),
      JSON.stringify(input),
      LIST_TTL_MS,
      input.origin,
      ...letter,
      takeForMs ?? '',
      sessionId,
    )) as [number, string | null, number, number?, number?];
    const result: PushResult = { length, poked: poked === 1 };
    if (fence !== undefined) result.granted = { fence: Number(fence), clean: clean === 1 };
    return lease ? { holder: parseLeaseValue(lease).instanceId, ...result } : result;
  }

  /**
   * Takes every input of the session's list, in order, if `holder` (this instance and its
   * grant's fence) still holds the session's lease; none when the list is empty or the lease is
   * no longer that grant's.
   */
  async drain(
    sessionId: string,
    holder: { instanceId: string; fence: number },
  ): Promise<PendingInput[]> {
    const { keys } = this;
    const value = leaseValue(holder.instanceId, holder.fence);
    const items = await this.redis.agentPendingDrain(
      keys.pending(sessionId),
      keys.lease(sessionId),
      value,
    );
    return (items ?? []).map((item) => JSON.parse(item) as PendingInput);
  }

  /** Puts inputs taken by `drain` back at the head of the session's list, in their order. */
  async restore(sessionId: string, inputs: readonly PendingInput[]): Promise<void> {
    if (inputs.length === 0) return;
    const key = this.keys.pending(sessionId);
    const items = inputs.map((input) => JSON.stringify(input)).reverse();
    await this.redis
      .multi()
      .lpush(key, ...items)
      .pexpire(key, LIST_TTL_MS)
      .exec();
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
