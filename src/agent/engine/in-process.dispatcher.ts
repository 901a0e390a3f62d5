import type {
  AbortOptions,
  DropReason,
  IncomingMessage,
  Settlement,
  WorkDispatcher,
} from '../../contracts';
import { Deferred } from './deferred';
import type { TurnScheduler } from './turn-scheduler';

/** The default `WorkDispatcher`: every session's lane runs in this process. */
export class InProcessDispatcher implements WorkDispatcher {
  constructor(private readonly scheduler: TurnScheduler) {}

  submit(message: IncomingMessage): Promise<Settlement> {
    const settlement = new Deferred<Settlement>();
    this.scheduler.enter({ message, settlement });
    return settlement.promise;
  }

  abort(sessionId: string, options: AbortOptions): boolean {
    return this.scheduler.abort(sessionId, options);
  }

  stop(sessionId: string, reason: DropReason, why?: string): Promise<void> {
    return this.scheduler.stopSession(sessionId, reason, why);
  }

  resume(): void {
    this.scheduler.pumpAll();
  }

  waiting(sessionId: string): IncomingMessage[] {
    return this.scheduler.waiting(sessionId);
  }

  runningTurn(sessionId: string): string | undefined {
    return this.scheduler.runningTurnId(sessionId);
  }

  activeSessions(): string[] {
    return this.scheduler.activeSessions();
  }
}
