import type { WriteFencing } from '../../contracts';
import type { LeaseGrant } from './session-leases';

/** What `LeaseFencing` asks of the leases: this instance's grant of a session, if it has one. */
export interface GrantSource {
  grantOf(sessionId: string): LeaseGrant | undefined;
  /** A store refused a write of this fence: the grant holding it (or an older) is lost. */
  lose?(sessionId: string, fence: number): void;
}

/** Most input sessions kept for the stores (the oldest are dropped first). */
const INPUTS_KEPT = 10_000;

/**
 * The fences of one instance's writes, from its session leases (see `WriteFencing`):
 *
 * - a session this instance holds: its grant's fence;
 * - a session it held and lost (taken over, or not renewed in time) but did not let go: a write
 *   of a turn (`turnId` given) still carries the last fence it held, so that a turn of the old
 *   lease that goes on writing (the process was paused, the network partitioned) is refused
 *   once the new holder claimed a newer fence;
 * - otherwise nothing: such a write is not a turn's (accepting an input for a session another
 *   instance runs, dropping one at the gate) and is not fenced.
 *
 * A session let go cleanly (`released`: no turn of it runs here any more) is forgotten.
 */
export class LeaseFencing implements WriteFencing {
  /** The last fence held per session not let go cleanly. */
  private readonly last = new Map<string, number>();
  /** The sessions of inputs entered here, until a store asks (`sessionOfInput`). */
  private readonly inputs = new Map<string, string>();

  /**
   * `leases`: this instance's leases; may be bound later (`bind`), as the stores are made before
   * distribution starts. Unbound, no write is fenced.
   */
  constructor(private leases?: GrantSource) {}

  /** Binds the leases whose grants give the fences (distribution does it when it starts). */
  bind(leases: GrantSource): void {
    this.leases = leases;
  }

  fenceFor(sessionId: string, turnId?: string): number | undefined {
    const grant = this.leases?.grantOf(sessionId);
    if (grant) {
      this.last.set(sessionId, grant.fence);
      return grant.fence;
    }
    return turnId === undefined ? undefined : this.last.get(sessionId);
  }

  /** An input of `sessionId` is run here: a store may ask for its session once. */
  runs(inputId: string, sessionId: string): void {
    this.inputs.set(inputId, sessionId);
    // Inputs whose entries are never written (a session deleted first) are not kept forever.
    if (this.inputs.size > INPUTS_KEPT) this.inputs.delete(this.inputs.keys().next().value!);
  }

  /** The session of an input `runs` named, once (the store remembers it from then on). */
  sessionOfInput(inputId: string): string | undefined {
    const sessionId = this.inputs.get(inputId);
    if (sessionId !== undefined) this.inputs.delete(inputId);
    return sessionId;
  }

  /**
   * A store refused a write of `fence` (another instance claimed a newer one): the lease is
   * lost now, not at the next renewal, so nothing more of the old turn is taken for this
   * instance's (its settlements are not passed on, its turn is stopped).
   */
  refused(sessionId: string, fence: number): void {
    this.leases?.lose?.(sessionId, fence);
  }

  /** Records a grant (its fence is the one the session's turns carry from now on). */
  granted(grant: LeaseGrant): void {
    this.last.set(grant.sessionId, grant.fence);
  }

  /** The session was let go cleanly: no turn of it runs here, so no fence is kept for it. */
  released(sessionId: string): void {
    this.last.delete(sessionId);
  }

  /** How many sessions keep a fence (held, or lost and not let go). */
  get size(): number {
    return this.last.size;
  }
}
