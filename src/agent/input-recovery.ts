import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import {
  WellKnownMetadataKeys as K,
  escapeForLog,
  type IncomingMessage,
  type InboxEntry,
  type Settlement,
  type TurnRecord,
} from '../contracts';
import { closingMarkers, InputGate } from './engine';
import { AGENT_MODULE_OPTIONS } from './agent.module-definition';
import type { AgentModuleOptions } from './agent.options';
import { GUARDED_STORES, type GuardedStores } from './store-guard';

/** What a start-up recovery found and did. */
export interface RecoveryReport {
  /** Turns a crash interrupted, closed now (outcome `error`). */
  closedTurns: number;
  /** Accepted inputs that had not entered a turn, handed to their lanes again. */
  resumedInputs: number;
  /** Milliseconds it took. */
  ms: number;
}

/** The notice of a turn a crash or a kill interrupted. */
export const INTERRUPTED_NOTICE = '[error] The turn was interrupted by a restart.';

/** Settled inputs are remembered this long, so a repeated delivery gets the first settlement. */
const REMEMBER_MS = 24 * 60 * 60 * 1000;
const PRUNE_EVERY_MS = 60 * 60 * 1000;

/**
 * Nothing accepted is lost: at start, before the application serves anything, the inputs the
 * inbox kept unsettled are taken up in arrival order. Those of a turn that a crash interrupted
 * close that turn once (outcome `error`, its record marker and the stop marker for the next model,
 * P4, P5) and settle with it; the others go the whole way again. Settled entries are pruned after
 * a day.
 */
@Injectable()
export class InputRecovery implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Recovery');
  private timer?: NodeJS.Timeout;
  /** The last recovery's report (`undefined` before it ran). */
  report?: RecoveryReport;

  constructor(
    @Inject(GUARDED_STORES) private readonly stores: GuardedStores,
    private readonly gate: InputGate,
    @Inject(AGENT_MODULE_OPTIONS) private readonly options: AgentModuleOptions,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Distributed mode: the inbox is shared, and its unsettled inputs are mostly those other
    // live instances are running; one starting must not close their turns nor run their
    // inputs again. (Taking over a dead instance's sessions is the lease holder's job.)
    this.report = this.options.distribution
      ? { closedTurns: 0, resumedInputs: 0, ms: 0 }
      : await this.recover();
    if (this.report.closedTurns || this.report.resumedInputs) {
      const { closedTurns, resumedInputs, ms } = this.report;
      this.logger.log(
        `Recovered after a restart: ${closedTurns} interrupted turn(s) closed, ${resumedInputs} waiting input(s) resumed (${ms} ms)`,
      );
    }
    this.timer = setInterval(() => void this.prune(), PRUNE_EVERY_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  /**
   * Distributed mode's takeover of one session, by the instance that just took its lease (and
   * claimed its fence, so the previous holder writes no more): its interrupted turns are closed
   * once (as after a restart), and the inputs the previous holder's lane had taken without
   * opening a turn with them are returned, in arrival order, for the new holder's lane. Inputs
   * accepted less than `settledAfterMs` ago, or named in `onTheirWay` (the session's pending
   * list), are on their way by the usual path and are left alone.
   */
  async takeOver(
    sessionId: string,
    onTheirWay: ReadonlySet<string>,
    settledAfterMs: number,
  ): Promise<Array<IncomingMessage & { id: string }>> {
    const entries = await this.stores.inbox.unsettled(sessionId);
    const { turns, waiting } = groupByTurn(entries);
    for (const [turnId, members] of turns) await this.closeTurn(turnId, members);
    if (turns.size) {
      this.logger.log(
        `Took over session ${escapeForLog(sessionId)}: ${turns.size} interrupted turn(s) closed`,
      );
    }
    const oldest = new Date(Date.now() - settledAfterMs).toISOString();
    return waiting
      .filter((e) => !onTheirWay.has(e.id) && e.acceptedAt <= oldest)
      .map((e) => e.message);
  }

  /** Closes interrupted turns and resumes waiting inputs; see the class. */
  async recover(): Promise<RecoveryReport> {
    const started = performance.now();
    const entries = await this.stores.inbox.unsettled();
    const { turns: byTurn, waiting } = groupByTurn(entries);
    for (const [turnId, members] of byTurn) await this.closeTurn(turnId, members);
    // In arrival order: each is on its way before the next is taken up.
    for (const entry of waiting) void this.gate.resume(entry.message);
    await this.prune();
    return {
      closedTurns: byTurn.size,
      resumedInputs: waiting.length,
      ms: Math.round(performance.now() - started),
    };
  }

  /**
   * Closes a turn once: unless its record is already in history (the crash came after its
   * bookkeeping), the stop marker and the event marker with outcome `error`; then its inputs
   * settle with that outcome, which a repeated delivery of any of them gets too.
   */
  private async closeTurn(turnId: string, members: InboxEntry[]): Promise<void> {
    const { sessionId, message } = members[0];
    const stored = await this.stores.history.history(sessionId);
    const own = stored.filter((m) => m.metadata?.[K.TurnId] === turnId);
    const recorded = own.find((m) => m.metadata?.[K.TurnRecord] !== undefined);
    const record: TurnRecord = recorded
      ? (recorded.metadata[K.TurnRecord] as TurnRecord)
      : {
          outcome: 'error',
          ...(message.source !== undefined ? { source: message.source } : {}),
          error: INTERRUPTED_NOTICE,
        };
    if (!recorded) {
      const markers = closingMarkers(sessionId, turnId, record, {
        stopped: own.length > 0,
        interrupted: true,
      });
      await this.stores.archive.append(markers);
      await this.stores.sessions
        .update(sessionId, { lastTurn: { turnId, ...record } })
        .catch((error: unknown) =>
          this.logger.warn(
            `turn ${turnId}: could not record the session's last turn: ${String(error)}`,
          ),
        );
    }
    const settlement: Settlement = {
      settled: 'turn',
      turnId,
      outcome: record.outcome,
      ...(record.error ? { error: record.error } : {}),
    };
    await this.stores.inbox.settle(
      members.map((m) => m.id),
      settlement,
    );
  }

  private async prune(): Promise<void> {
    const before = new Date(Date.now() - REMEMBER_MS).toISOString();
    await this.stores.inbox
      .prune(before)
      .catch((error: unknown) => this.logger.warn(`Could not prune the inbox: ${String(error)}`));
  }
}

/** Unsettled inbox entries: those of each interrupted turn, and those in no turn, in order. */
function groupByTurn(entries: InboxEntry[]): {
  turns: Map<string, InboxEntry[]>;
  waiting: InboxEntry[];
} {
  const turns = new Map<string, InboxEntry[]>();
  const waiting: InboxEntry[] = [];
  for (const entry of entries) {
    if (entry.turnId === undefined) waiting.push(entry);
    else turns.set(entry.turnId, [...(turns.get(entry.turnId) ?? []), entry]);
  }
  return { turns, waiting };
}
