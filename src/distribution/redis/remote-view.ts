import type Redis from 'ioredis';
import type { IncomingMessage, SessionLanes } from '../../contracts';
import { holderState } from './holder-requests';
import { RedisKeys } from './redis-keys';

/** What an instance knows of a session another instance runs. */
export interface RemoteSessionState {
  /** The instance that runs it. */
  holder: string;
  runningTurn?: string;
  /** Its waiting inputs in arrival order (S8). */
  waiting: IncomingMessage[];
}

/** One change as it travels: the session's state, or `null` once it is idle. */
interface ViewChange {
  sessionId: string;
  state: RemoteSessionState | null;
}

/**
 * The publish of view changes (see `RemoteView.publish`): KEYS the view hash, then each changed
 * session's lease; ARGV the instance id, the channel, then per session its id, its state for the
 * hash ('' when idle) and its change as JSON. A change is written (hash) and sent (one message
 * for all, `<instance id>\n[<changes>]`) only when the session's lease is this instance's or
 * nobody's: an instance that lost the lease (a pause longer than a lease, Redis away) must not
 * overwrite the state the new holder published. How many changes went out.
 */
const PUBLISH_SCRIPT = `
local sent = {}
for i = 2, #KEYS do
  local lease = redis.call('GET', KEYS[i])
  if not lease or string.match(lease, '^(.*)|%d+$') == ARGV[1] then
    local at = 3 * i - 3
    if ARGV[at + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[at])
    else redis.call('HSET', KEYS[1], ARGV[at], ARGV[at + 1]) end
    sent[#sent + 1] = ARGV[at + 2]
  end
end
if #sent > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[1] .. '\\n[' .. table.concat(sent, ',') .. ']')
end
return #sent`;

type Scripted = Redis & {
  agentViewPublish(numKeys: number, ...keysThenArgs: string[]): Promise<number>;
};

/**
 * Every instance's view of the sessions the others run, for the contract's synchronous answers
 * (`AgentService.abort`, S3; the waiting list, S8; session states). A holder publishes each
 * change of its sessions (turn start and end, the waiting list) to one pub/sub channel and keeps
 * them in a hash (`<prefix>:view`), from which an instance that starts learns what runs now;
 * states of instances that are gone are forgotten.
 */
export class RemoteView {
  private readonly states = new Map<string, RemoteSessionState>();
  private readonly channel: string;
  private readonly hash: string;
  private readonly keys: RedisKeys;
  private readonly scripted: Scripted;
  private subscriber?: Redis;

  constructor(
    private readonly redis: Redis,
    private readonly options: { prefix: string; instanceId: string },
  ) {
    this.channel = `${options.prefix}:view`;
    this.hash = `${options.prefix}:view`;
    this.keys = new RedisKeys(options.prefix);
    if (!('agentViewPublish' in redis)) {
      redis.defineCommand('agentViewPublish', { lua: PUBLISH_SCRIPT });
    }
    this.scripted = redis as Scripted;
  }

  /** Subscribes, then reads what runs now. */
  async start(): Promise<void> {
    // A subscriber waits for Redis (the command client fails at once instead; see runtime).
    const subscriber = this.redis.duplicate({ enableOfflineQueue: true });
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, text: string) => this.apply(text));
    await subscriber.subscribe(this.channel);
    const all = await this.redis.hgetall(this.hash);
    for (const [sessionId, text] of Object.entries(all)) {
      const state = JSON.parse(text) as RemoteSessionState;
      if (state.holder !== this.options.instanceId && !this.states.has(sessionId)) {
        this.states.set(sessionId, state);
      }
    }
  }

  /** Publishes the states of `sessionIds` as `lanes` have them now (idle: `null`), together. */
  publishFrom(
    sessionIds: readonly string[],
    lanes: Pick<SessionLanes, 'runningTurn' | 'waiting'>,
  ): Promise<number> {
    return this.publish(
      sessionIds.map((sessionId) => {
        const state = holderState(lanes, sessionId);
        const idle = state.runningTurn === undefined && state.waiting.length === 0;
        return { sessionId, state: idle ? null : state };
      }),
    );
  }

  /**
   * Publishes the states of sessions this instance runs (`null`: idle now), all in one script
   * and one message; resolves with how many went out. A session whose lease another instance
   * holds now is left out (`PUBLISH_SCRIPT`): this instance lost it, and the state there is the
   * new holder's.
   */
  async publish(
    changes: ReadonlyArray<{
      sessionId: string;
      state: Omit<RemoteSessionState, 'holder'> | null;
    }>,
  ): Promise<number> {
    if (changes.length === 0) return 0;
    const holder = this.options.instanceId;
    const keys = [this.hash];
    const args = [holder, this.channel];
    for (const { sessionId, state } of changes) {
      const full = state && { holder, ...state };
      const change: ViewChange = { sessionId, state: full };
      keys.push(this.keys.lease(sessionId));
      args.push(sessionId, full ? JSON.stringify(full) : '', JSON.stringify(change));
    }
    return this.scripted.agentViewPublish(keys.length, ...keys, ...args);
  }

  /** The state of a session another instance runs, as last heard. */
  get(sessionId: string): RemoteSessionState | undefined {
    return this.states.get(sessionId);
  }

  /** The sessions other instances run, as last heard. */
  sessions(): string[] {
    return [...this.states.keys()];
  }

  /**
   * Forgets the states of instances not in `live`. (The hash keeps them until the session's next
   * holder writes it; an instance that starts forgets them at its first heartbeat.)
   */
  forgetGone(live: ReadonlySet<string>): void {
    for (const [sessionId, state] of this.states) {
      if (!live.has(state.holder)) this.states.delete(sessionId);
    }
  }

  async close(): Promise<void> {
    await this.subscriber?.quit().catch(() => this.subscriber?.disconnect());
  }

  /** Applies one message: the changes of one holder, in order (none of this instance's). */
  private apply(text: string): void {
    const at = text.indexOf('\n');
    const from = text.slice(0, at);
    if (at < 0 || from === this.options.instanceId) return;
    for (const change of JSON.parse(text.slice(at + 1)) as ViewChange[]) {
      if (change.state) this.states.set(change.sessionId, change.state);
      else if (this.states.get(change.sessionId)?.holder === from) {
        this.states.delete(change.sessionId);
      }
    }
  }
}
