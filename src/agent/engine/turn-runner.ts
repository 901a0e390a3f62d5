import { Logger } from '@nestjs/common';
import {
  escapeForLog,
  type TurnAfterContext,
  type TurnEnd,
  type TurnStartEvent,
} from '../../contracts';
import type { TurnConclusion, TurnInfo } from '../instrumentation';
import {
  closeUnanswered,
  deliverReply,
  endStream,
  errorNotice,
  recordLastTurn,
} from './phases/bookkeeping';
import { archiveOpening } from './phases/input-step';
import { basePrompt } from './phases/prompt-step';
import type { EnginePorts, LaneHandle } from './ports';
import type { Turn } from './turn';
import { describeError } from './describe-error';
import { turnEndLog } from './turn-end-log';
import { finaliseReply, runSteps, throwIfAborted, type LoopPorts } from './turn-loop';
import { TurnDeadline } from './turn-deadline';
import { TurnState } from './turn-state';

/** What the runner uses: its loop's reach plus the settings, models and history of a turn. */
export type RunnerPorts = LoopPorts & Pick<EnginePorts, 'sessions' | 'models' | 'history'>;

/**
 * Runs one turn, calling its phases in order: `agent:turn:before` around the whole turn (its
 * default action archives the opening inputs, P3), model resolution, prompt, the step loop, the
 * reply, the bookkeeping (P4, P5), the stream-end marker (I9) and `agent:turn:after` (H4,
 * I13). Ends with the turn's `TurnEnd`, or `undefined` when `agent:turn:before` blocked it.
 * Never rejects.
 */
export class TurnRunner {
  private readonly logger = new Logger('Turn');
  private readonly warn = (line: string) => this.logger.warn(line);
  private readonly error = (line: string) => this.logger.error(line);

  constructor(private readonly ports: RunnerPorts) {}

  run(turn: Turn, lane: LaneHandle): Promise<TurnConclusion> {
    // Optional fields are set after the literal, not spread into it (a spread makes V8 build
    // the whole object the slow way, on every turn).
    const info: TurnInfo = {
      sessionId: turn.sessionId,
      turnId: turn.id,
      opened: turn.inputs.length,
      inputs: turn.inputs.map((input) => input.message),
    };
    if (turn.source !== undefined) info.source = turn.source;
    return this.ports.instrumentation.turn(info, () => this.withDeadline(turn, lane));
  }

  /**
   * The turn deadline (`turnTimeoutMs`, 0 = none): a turn past it is stopped like an abort and
   * ends `error` with a notice that it took too long, so no lane stays blocked for ever. Paused
   * while a tool call waits for approval (`TurnDeadline`).
   */
  private async withDeadline(turn: Turn, lane: LaneHandle): Promise<TurnConclusion> {
    const limit = this.ports.options.turnTimeoutMs;
    if (limit > 0) {
      turn.deadline = new TurnDeadline(limit, () => {
        if (turn.abort({ reason: `turn deadline of ${limit} ms` })) turn.deadlineHit = true;
      });
    }
    try {
      return await this.guarded(new TurnState(turn), lane);
    } finally {
      turn.deadline?.clear();
    }
  }

  private async guarded(state: TurnState, lane: LaneHandle): Promise<TurnConclusion> {
    const { turn } = state;
    let end: TurnEnd | undefined;
    try {
      const ctx = { turnId: turn.id, sessionId: turn.sessionId, inputs: turn.inputs };
      await this.ports.hooks.run('agent:turn:before', ctx, async () => {
        end = await this.body(state, lane);
      });
    } catch (error) {
      // A middleware threw before `next`: the turn ends with `error` (nothing was archived).
      // After `next` the turn has already ended and its end stands.
      if (end) this.warn(`agent:turn:before middleware threw after next: ${String(error)}`);
      else {
        this.announceStart(state);
        end = await this.finish(state, this.failure(state, error));
      }
    }
    if (!end) {
      endStream(this.ports, state);
      this.logger.log(
        `turn ${turn.id} session ${escapeForLog(turn.sessionId)} blocked by agent:turn:before`,
      );
    }
    return end;
  }

  /** The default action of `agent:turn:before`: the whole turn. */
  private async body(state: TurnState, lane: LaneHandle): Promise<TurnEnd> {
    const failed = await this.open(state).then(
      () => undefined,
      (error: unknown) => this.failure(state, error),
    );
    this.announceStart(state);
    const end =
      failed ??
      (await this.converse(state, lane).catch((error: unknown) => this.failure(state, error)));
    return this.finish(state, end);
  }

  /** Settings and model first: the archived inputs carry their token count for that model. */
  private async open(state: TurnState): Promise<void> {
    state.settings = await this.ports.sessions.get(state.sessionId);
    state.model = this.ports.models.resolve(state.settings?.model);
    await archiveOpening(this.ports, state);
  }

  private async converse(state: TurnState, lane: LaneHandle): Promise<TurnEnd> {
    const { ports } = this;
    const turnId = state.turn.id;
    if (!state.model) {
      const error = `[system] ${ports.models.diagnose(state.settings?.model)}`;
      return { turnId, outcome: 'error', error };
    }
    // Both reads at once: one round trip of a database store's latency less per turn.
    const counted = ports.history.count(state.sessionId);
    counted.catch(() => undefined); // its failure is thrown below, unless the prompt's is first
    state.working = await basePrompt(ports, state);
    state.historyBase = await counted;
    throwIfAborted(state);
    const final = await runSteps(ports, state, lane);
    const reply = await finaliseReply(ports, state, final);
    throwIfAborted(state);
    if (!reply.visible.trim()) return { turnId, outcome: 'silent' };
    // The stream ends before the reply it streamed is delivered.
    endStream(ports, state);
    await deliverReply(ports, state, reply);
    return { turnId, outcome: 'replied', reply: reply.visible };
  }

  private failure(state: TurnState, error: unknown): TurnEnd {
    const turnId = state.turn.id;
    if (state.turn.deadlineHit) {
      const seconds = Math.round(this.ports.options.turnTimeoutMs / 100) / 10;
      const error = `[error] The turn took too long and was stopped after ${seconds} s.`;
      return { turnId, outcome: 'error', error };
    }
    if (state.turn.aborted) return { turnId, outcome: 'aborted' };
    // The log gets the whole story (a store's driver text is its error's cause); the session
    // gets one sentence in plain words.
    this.warn(
      `turn ${turnId} session ${escapeForLog(state.sessionId)} failed: ${describeError(error)}`,
    );
    return { turnId, outcome: 'error', error: errorNotice(error) };
  }

  /** `agent:turn:start`, once per turn that was not blocked. */
  private announceStart(state: TurnState): void {
    const { turn } = state;
    const event: TurnStartEvent = {
      sessionId: turn.sessionId,
      turnId: turn.id,
      inputs: turn.inputs.map((i) => i.message),
      seq: ++turn.seq,
    };
    if (turn.source !== undefined) event.source = turn.source;
    this.ports.events.emit('agent:turn:start', event);
  }

  /** Notice and markers, the session's last turn, stream end, `agent:turn:after`, log line. */
  private async finish(state: TurnState, end: TurnEnd): Promise<TurnEnd> {
    const { ports } = this;
    const { turn } = state;
    if (end.outcome !== 'replied') await closeUnanswered(ports, state, end, this.error);
    await recordLastTurn(ports, state, end, this.warn);
    endStream(ports, state);
    const after: TurnAfterContext = {
      inputs: turn.inputs,
      reply: end.reply ?? '',
      outcome: end.outcome,
      sessionId: turn.sessionId,
      turnId: turn.id,
    };
    if (end.error) after.error = end.error;
    await ports.hooks
      .run('agent:turn:after', after)
      .catch((error: unknown) =>
        this.error(`agent:turn:after middleware threw (turn ${turn.id}): ${String(error)}`),
      );
    ports.events.emit('agent:turn:end', { sessionId: turn.sessionId, ...end, seq: ++turn.seq });
    // One structured line per turn (README, "Logs and traces"); S3: the only place of `reason`.
    this.logger.log(turnEndLog(state, end.outcome));
    return end;
  }
}
