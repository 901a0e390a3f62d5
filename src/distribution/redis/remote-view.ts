import type Redis from 'ioredis';
import type { IncomingMessage, SessionLanes } from '../../contracts';
import { holderState } from './holder-requests';

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
  private subscriber?: Redis;

  constructor(
    private readonly redis: Redis,
    private readonly options: { prefix: string; instanceId: string },
  ) {
    this.channel = `${options.prefix}:view`;
    this.hash = `${options.prefix}:view`;
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
  ): Promise<void> {
    return this.publish(
      sessionIds.map((sessionId) => {
        const state = holderState(lanes, sessionId);
        const idle = state.runningTurn === undefined && state.waiting.length === 0;
        return { sessionId, state: idle ? null : state };
      }),
    );
  }

  /**
   * Publishes the states of sessions this instance runs (`null`: idle now), all in one MULTI and
   * one message.
   */
  async publish(
    changes: ReadonlyArray<{
      sessionId: string;
      state: Omit<RemoteSessionState, 'holder'> | null;
    }>,
  ): Promise<void> {
    if (changes.length === 0) return;
    const holder = this.options.instanceId;
    // A pipeline, not a MULTI: one connection keeps its order, and nothing needs the two atomic.
    const pipeline = this.redis.pipeline();
    const message: ViewChange[] = changes.map(({ sessionId, state }) => {
      const full = state && { holder, ...state };
      if (full) pipeline.hset(this.hash, sessionId, JSON.stringify(full));
      else pipeline.hdel(this.hash, sessionId);
      return { sessionId, state: full };
    });
    // `<instance id>\n<changes>`: an instance skips its own messages without parsing them.
    await pipeline.publish(this.channel, `${holder}\n${JSON.stringify(message)}`).exec();
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
