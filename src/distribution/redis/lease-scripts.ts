import type Redis from 'ioredis';

/**
 * The Lua scripts of session leases (see `SessionLeases`): each operation is one script, so one
 * round trip, and atomic on the server.
 */

/** Acquire: KEYS lease, fence; ARGV instanceId, leaseMs, floor, this instance's known value. */
const ACQUIRE = `
local current = redis.call('GET', KEYS[1])
if current then
  if ARGV[4] ~= '' and current == ARGV[4] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(string.match(current, '|(%d+)$'))
  end
  return false
end
local f = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[3])
if f <= floor then f = floor + 1; redis.call('SET', KEYS[2], f) end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. f, 'PX', ARGV[2])
return f`;

/** Release (compare-and-delete): KEYS lease; ARGV value. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** Holder: KEYS lease. `{value, pttl}` or nil. */
const HOLDER = `
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}`;

/** Renew: KEYS leases; ARGV leaseMs, then each lease's expected value. 1 renewed, 0 lost. */
const RENEW = `
local out = {}
for i = 1, #KEYS do
  out[i] = 0
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  end
end
return out`;

/** The lease scripts, as ioredis defines them on the client (one round trip each). */
export interface LeaseCommands {
  /** Lease and fence keys; instanceId, leaseMs, floor, known value. The fence, or null. */
  agentLeaseAcquire(...keysThenArgs: (string | number)[]): Promise<number | null>;
  agentLeaseRelease(lease: string, value: string): Promise<number>;
  agentLeaseHolder(lease: string): Promise<[string, number] | null>;
  agentLeaseRenew(numKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>;
}

/** Defines the lease scripts on `redis` (names of their own; defining again is harmless). */
export function defineLeaseCommands(redis: Redis): LeaseCommands {
  redis.defineCommand('agentLeaseAcquire', { numberOfKeys: 2, lua: ACQUIRE });
  redis.defineCommand('agentLeaseRelease', { numberOfKeys: 1, lua: RELEASE });
  redis.defineCommand('agentLeaseHolder', { numberOfKeys: 1, lua: HOLDER });
  redis.defineCommand('agentLeaseRenew', { lua: RENEW });
  return redis as unknown as LeaseCommands;
}

/** Splits a lease value `<instanceId>|<fence>` at its last `|`. */
export function parseLeaseValue(value: string): { instanceId: string; fence: number } {
  const at = value.lastIndexOf('|');
  const fence = Number(value.slice(at + 1));
  if (at < 0 || !Number.isSafeInteger(fence)) throw new Error(`Malformed lease value: ${value}`);
  return { instanceId: value.slice(0, at), fence };
}
