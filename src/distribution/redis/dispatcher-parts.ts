import type { FenceStore } from './held-sessions';
import type { InstanceMailbox } from './instance-mailbox';
import type { InstanceRegistry } from './instance-registry';
import type { LeaseFencing } from './lease-fencing';
import type { PendingInputs } from './pending-inputs';
import type { RedisHealth } from './redis-health';
import type { RemoteView } from './remote-view';
import type { SessionLeases } from './session-leases';
import type { SettlementSource } from './settlement-waiters';
import type { WakeQueue } from './wake-queue';

/** What a distributed dispatcher is made of (one set per instance). */
export interface DistributedDispatcherParts {
  instanceId: string;
  leases: SessionLeases;
  fencing: LeaseFencing;
  fences: FenceStore;
  pending: PendingInputs;
  wake: WakeQueue;
  mailbox: InstanceMailbox;
  /** The live instances: whom holds are told to. */
  registry: InstanceRegistry;
  /** How long a control request to the holder of a session may take (ms). */
  requestTimeoutMs: number;
  /** The lease length (ms). */
  leaseMs: number;
  /** Sessions run here at once (wake jobs and sessions taken where their input came). */
  concurrency: number;
  /** Whether an idle session is run by the instance its input came to, when it has room. */
  runWhereReceived: boolean;
  /** Told how many sessions taken where their input came run here now. */
  directRuns?(count: number): void;
  /** The inbox, where a settlement is found when its message did not come (a takeover). */
  inbox: SettlementSource;
  /** The other instances' sessions, for the synchronous view. */
  remote: RemoteView;
  /** Whether Redis is reachable: inputs and control calls fail at once when it is not. */
  health?: RedisHealth;
}
