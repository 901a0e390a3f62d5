import { newId, type DropReason, type HoldRelease } from '../../contracts';
import type { HoldTable } from '../hold-table';
import type { InstanceMailbox } from './instance-mailbox';
import type { InstanceRegistry } from './instance-registry';

const HOLD = 'hold';
const RELEASE = 'release';
const STOP_ALL = 'stop-all';

/** A hold another instance placed here: its release, and who placed it. */
interface RemoteHold {
  origin: string;
  release: () => void;
}

/** What holds across instances are placed and carried out with. */
export interface CrossInstanceHoldsParts {
  instanceId: string;
  mailbox: InstanceMailbox;
  registry: InstanceRegistry;
  requestTimeoutMs: number;
  /** This instance's holds (what its gate and lanes ask). */
  holds: HoldTable;
  /** Lets the lanes open the turns that waited for a hold. */
  resume(): void;
  /** Stops one session wherever it runs. */
  stop(sessionId: string, reason: DropReason, why?: string): Promise<void>;
  /** The sessions this instance runs now. */
  runningHere(): string[];
  /** The sessions with inputs on their way (pending lists). */
  pendingSessions(): Promise<string[]>;
}

/**
 * Clearing's holds (S4) across instances: a hold is placed on every live instance before
 * anything is stopped (so no instance admits an input or opens a turn of a held session), the
 * sessions are then stopped where they run, and the release goes to every instance told. A hold
 * whose instance is gone (no heartbeat) is forgotten, so nothing stays held by a dead instance.
 */
export class CrossInstanceHolds {
  private readonly remote = new Map<string, RemoteHold>();

  constructor(private readonly parts: CrossInstanceHoldsParts) {
    this.listen();
  }

  /** Holds the sessions (`undefined` = all) everywhere and stops them; resolves with the release. */
  async hold(sessionIds: readonly string[] | undefined, why?: string): Promise<HoldRelease> {
    const { holds, registry, instanceId } = this.parts;
    const holdId = newId();
    const local = holds.hold(sessionIds);
    const others = (await registry.live()).filter((id) => id !== instanceId);
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      local();
      this.parts.resume();
      await this.askAll(others, RELEASE, { holdId });
    };
    try {
      await this.askAll(others, HOLD, { holdId, sessionIds: sessionIds ?? null });
      if (sessionIds) {
        await Promise.all(sessionIds.map((id) => this.parts.stop(id, 'cleared', why)));
      } else await this.stopAll(others, why);
    } catch (error) {
      await release();
      throw error;
    }
    return release;
  }

  /** Forgets the holds of instances that are gone (no heartbeat). */
  async forgetGone(): Promise<void> {
    if (!this.remote.size) return;
    const live = new Set(await this.parts.registry.live());
    for (const [holdId, hold] of this.remote) {
      if (live.has(hold.origin)) continue;
      this.remote.delete(holdId);
      hold.release();
      this.parts.resume();
    }
  }

  /** Clearing all: every instance stops what it runs; sessions with inputs on their way too. */
  private async stopAll(others: string[], why?: string): Promise<void> {
    const { stop } = this.parts;
    await Promise.all([
      this.askAll(others, STOP_ALL, { why: why ?? null }),
      ...this.parts.runningHere().map((id) => stop(id, 'cleared', why)),
    ]);
    const waiting = await this.parts.pendingSessions();
    await Promise.all(waiting.map((id) => stop(id, 'cleared', why)));
  }

  /** A request to each of `instances`; one that does not answer (gone) is passed over. */
  private async askAll(instances: string[], type: string, body: unknown): Promise<void> {
    const { mailbox, requestTimeoutMs } = this.parts;
    await Promise.all(
      instances.map((id) => mailbox.request(id, type, body, requestTimeoutMs).catch(() => null)),
    );
  }

  private listen(): void {
    const { mailbox, holds } = this.parts;
    mailbox.on(HOLD, ({ body, from }) => {
      const { holdId, sessionIds } = body as { holdId: string; sessionIds: string[] | null };
      this.remote.set(holdId, { origin: from, release: holds.hold(sessionIds ?? undefined) });
      return null;
    });
    mailbox.on(RELEASE, ({ body }) => {
      const { holdId } = body as { holdId: string };
      this.remote.get(holdId)?.release();
      this.remote.delete(holdId);
      this.parts.resume();
      return null;
    });
    mailbox.on(STOP_ALL, async ({ body }) => {
      const why = (body as { why: string | null }).why ?? undefined;
      await Promise.all(this.parts.runningHere().map((id) => this.parts.stop(id, 'cleared', why)));
      return null;
    });
  }
}
