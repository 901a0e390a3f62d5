import { Logger } from '@nestjs/common';
import type { ModelMessage, TurnAfterContext } from '../../contracts';
import { historyToModelMessages } from '../../prompt';
import { finaliseReply } from './reply-finaliser';
import { historyLimitOf, runSteps, throwIfAborted } from './step-loop';
import type { TurnResult, Turn } from './turn';
import {
  deliverReply,
  endStream,
  errorNotice,
  persistMarkers,
  turnRecord,
  type TurnEnding,
} from './turn-bookkeeping';
import type { LaneHandle, TurnDeps } from './turn-deps';
import { archiveOpening } from './turn-inputs';
import { inputToModelMessage, TurnState } from './turn-state';

/**
 * Runs one turn: `agent:turn:before` around the whole turn (its default action archives the
 * opening inputs, P3), model resolution, prompt, the step loop, the reply, the bookkeeping (P4,
 * P5), the stream-end marker (I9) and `agent:turn:after` (H4, I13). Never rejects.
 */
export class TurnRunner {
  private readonly logger = new Logger('Turn');

  constructor(private readonly deps: TurnDeps) {}

  async run(turn: Turn, lane: LaneHandle): Promise<TurnResult> {
    const state = new TurnState(turn);
    let result: TurnResult | undefined;
    try {
      await this.deps.hooks.run(
        'agent:turn:before',
        { turnId: turn.id, sessionId: turn.sessionId, inputs: turn.inputs },
        async () => {
          result = await this.body(state, lane);
        },
      );
    } catch (error) {
      // A middleware threw before `next`: the turn ends with `error` (nothing was archived).
      // After `next` the turn has already ended and its result stands.
      if (!result) result = await this.finish(state, this.failure(state, error));
      else this.logger.warn(`agent:turn:before middleware threw after next: ${String(error)}`);
    }
    if (!result) {
      endStream(this.deps, state);
      this.logger.log(`turn ${turn.id} session ${turn.sessionId} blocked by agent:turn:before`);
      return { outcome: 'blocked' };
    }
    return result;
  }

  private async body(state: TurnState, lane: LaneHandle): Promise<TurnResult> {
    let ending: TurnEnding;
    try {
      ending = await this.converse(state, lane);
    } catch (error) {
      ending = this.failure(state, error);
    }
    return this.finish(state, ending);
  }

  private async converse(state: TurnState, lane: LaneHandle): Promise<TurnEnding> {
    const { deps } = this;
    const { turn } = state;
    // Settings and model first: the archived inputs carry their token count for that model.
    state.settings = await deps.sessions.get(turn.sessionId);
    state.model = deps.models.resolve(state.settings?.model);
    await archiveOpening(deps, state);
    this.announceStart(state);
    if (!state.model) {
      return {
        outcome: 'error',
        notice: `[system] ${deps.models.diagnose(state.settings?.model)}`,
      };
    }
    state.historyBase = await deps.history.count(turn.sessionId);
    state.working = await this.basePrompt(state);
    throwIfAborted(state);
    const final = await runSteps(deps, state, lane);
    const reply = await finaliseReply(deps, state, final);
    throwIfAborted(state);
    endStream(deps, state);
    if (!reply.visible.trim()) return { outcome: 'silent' };
    await deliverReply(deps, state, reply);
    return { outcome: 'replied', reply: reply.visible };
  }

  /** System prompt, history within the limit (this turn's inputs left out), then the inputs. */
  private async basePrompt(state: TurnState): Promise<ModelMessage[]> {
    const { deps } = this;
    const own = new Set(state.turn.inputs.map((i) => i.archived?.id));
    const limit = historyLimitOf(deps, state);
    const stored = await deps.history.history(state.sessionId, {
      limit: limit ? limit + own.size : 0,
    });
    const history = historyToModelMessages(
      stored.filter((m) => !own.has(m.id)),
      { room: state.isRoom },
    );
    const system: ModelMessage = {
      role: 'system',
      content: deps.options.systemPrompt,
      metadata: { injector: 'persona', bucket: 'persona' },
    };
    const inputs = state.turn.inputs.map((i) =>
      inputToModelMessage(i.message, state.acceptsImages, state.isRoom),
    );
    return [system, ...history, ...inputs];
  }

  private failure(state: TurnState, error: unknown): TurnEnding {
    if (state.turn.signal.aborted) return { outcome: 'aborted' };
    this.logger.warn(
      `turn ${state.turn.id} session ${state.sessionId} failed: ${(error as Error)?.stack ?? String(error)}`,
    );
    return { outcome: 'error', notice: errorNotice(error) };
  }

  /** `agent:turn:start`, once per turn (also for a turn that failed before it archived). */
  private announceStart(state: TurnState): void {
    if (state.announced) return;
    state.announced = true;
    const { turn } = state;
    this.deps.events.emit('agent:turn:start', {
      sessionId: turn.sessionId,
      turnId: turn.id,
      ...(turn.source !== undefined ? { source: turn.source } : {}),
      inputs: turn.inputs.map((i) => i.message),
    });
  }

  /** Notice, markers, stream end, `agent:turn:after`, turn-end log line. */
  private async finish(state: TurnState, ending: TurnEnding): Promise<TurnResult> {
    const { deps } = this;
    const { turn } = state;
    this.announceStart(state);
    if (ending.notice) {
      deps.events.emit('outbound:message', {
        sessionId: turn.sessionId,
        turnId: turn.id,
        content: ending.notice,
        source: 'system',
        platform: state.platform,
      });
    }
    if (ending.outcome !== 'replied') {
      await persistMarkers(deps, state, ending).catch((error: unknown) =>
        this.logger.error(`turn ${turn.id}: could not persist its markers: ${String(error)}`),
      );
    }
    // H4: the session keeps its last turn (with the error sentence on `error`).
    await deps.sessions
      .update(turn.sessionId, { lastTurn: { turnId: turn.id, ...turnRecord(state, ending) } })
      .catch((error: unknown) =>
        this.logger.warn(
          `turn ${turn.id}: could not record the session's last turn: ${String(error)}`,
        ),
      );
    endStream(deps, state);
    const after: TurnAfterContext = {
      inputs: turn.inputs,
      reply: ending.reply ?? '',
      outcome: ending.outcome,
      ...(ending.notice ? { error: ending.notice } : {}),
      sessionId: turn.sessionId,
      turnId: turn.id,
    };
    await deps.hooks
      .run('agent:turn:after', after)
      .catch((error: unknown) =>
        this.logger.error(`agent:turn:after middleware threw (turn ${turn.id}): ${String(error)}`),
      );
    deps.events.emit('agent:turn:end', {
      sessionId: turn.sessionId,
      turnId: turn.id,
      outcome: ending.outcome,
      ...(ending.notice ? { error: ending.notice } : {}),
      ...(ending.reply ? { reply: ending.reply } : {}),
    });
    const reason = turn.stop?.reason ? ` (reason: ${turn.stop.reason})` : '';
    this.logger.log(`turn ${turn.id} session ${turn.sessionId} ended ${ending.outcome}${reason}`);
    return { outcome: ending.outcome, reply: ending.reply, error: ending.notice };
  }
}
