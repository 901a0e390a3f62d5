import { Injectable } from '@nestjs/common';
import { InjectQueue } from '@nestjs/bullmq';
import type { JobsOptions, Queue } from 'bullmq';
import { outageWarning } from './redis-health';
import { activeTraceparent } from '../../contracts';

/** The BullMQ queue that wakes an idle session's work on some instance. */
export const WAKE_QUEUE = 'wake';

/**
 * The `@nestjs/bullmq` configuration key of the agent's queue (`BullModule.forRootAsync('agent')`,
 * `registerQueue({ configKey: 'agent' })`): the agent's connection and prefix are its own, and a
 * host's `BullModule.forRoot` for its own queues is neither used nor replaced.
 */
export const AGENT_BULL_CONFIG = 'agent';

/** Runs of a wake job before it is given up (200 ms doubling: about three minutes in all). */
const WAKE_ATTEMPTS = 10;

/** The data of a wake job: the session to run. */
export interface WakeJob {
  sessionId: string;
  /**
   * W3C `traceparent` of the span that woke the session (the input's `agent.input` when tracing
   * runs): the job's run continues that trace on whichever instance takes it.
   */
  traceparent?: string;
}

/**
 * The options of the wake job of a session: deduplicated by session id, so that while a job of
 * the session waits another add is the same job, and while one is active (an instance runs the
 * session) at most one more is kept to follow it (`keepLastIfActive`: an input that came as the
 * holder let go is not lost). A run that fails (the database away while the lease is taken) is
 * tried again with a growing delay, for a few minutes. Finished jobs are removed: the inbox is
 * the record, not BullMQ.
 */
export function wakeJobOptions(sessionId: string): JobsOptions {
  return {
    deduplication: { id: sessionId, keepLastIfActive: true },
    attempts: WAKE_ATTEMPTS,
    backoff: { type: 'exponential', delay: 200 },
    removeOnComplete: true,
    removeOnFail: true,
  };
}

/**
 * Wakes idle sessions: one BullMQ job per idle-to-busy transition (inputs for a session that an
 * instance holds go to that instance's mailbox and cost no job). Whichever instance's worker
 * takes the job takes the session's lease and runs it until it is idle.
 */
@Injectable()
export class WakeQueue {
  constructor(@InjectQueue(WAKE_QUEUE) private readonly queue: Queue<WakeJob>) {
    // It reconnects by itself: one throttled warning during an outage, not a stack per attempt.
    queue.on('error', outageWarning('WakeQueue'));
  }

  /** Adds the session's wake job (or joins the one already waiting), delayed by `delayMs`. */
  async wake(sessionId: string, delayMs = 0): Promise<void> {
    const options = wakeJobOptions(sessionId);
    const traceparent = activeTraceparent();
    await this.queue.add(
      WAKE_QUEUE,
      traceparent ? { sessionId, traceparent } : { sessionId },
      delayMs ? { ...options, delay: delayMs } : options,
    );
  }
}
