import { inspect } from 'node:util';
import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { escapeForLog, MAX_LOGGED_LENGTH, type Actor, type TurnOutcome } from '../../contracts';
import type { TurnState } from './turn-state';

/** The fields of the turn-end log line (README, "Logs and traces"). */
export interface TurnEndFields {
  sessionId: string;
  turnId: string;
  outcome: TurnOutcome;
  /** From the turn's start to its end, bookkeeping and `agent:turn:after` included. */
  durationMs: number;
  /** Model calls that answered (format retries included; one stopped mid-answer is not). */
  modelCalls: number;
  /** Tool calls the model asked for (refused and unknown ones included). */
  toolCalls: number;
  /** Prompt tokens of the last call and completion tokens of all calls, as reported. */
  tokens: { prompt: number; completion: number };
  /** Prompt tokens of the last call (reported, else estimated, U2); absent without a call. */
  used?: number;
  /** `used` / context window of the last call (U2); absent without a call. */
  usageRatio?: number;
  /** Who stopped the turn, when a person did (S3). */
  by?: Actor;
  /** Why it was stopped, when the stop said (S3: written here and nowhere else). */
  reason?: string;
  /** The trace the turn ran in, when a tracing SDK gave it a valid span context. */
  traceId?: string;
}

/**
 * The one log line a turn ends with. A JSON logger writes its fields (`toJSON`, Nest's
 * `ConsoleLogger({ json: true })` and pino-like loggers alike); a text logger writes the
 * human-readable line (`toString`, and `util.inspect`, which Nest's text `ConsoleLogger` prints
 * non-string messages through), with what users wrote escaped (`escapeForLog`).
 * @internal
 */
export class TurnEndLog {
  constructor(readonly fields: TurnEndFields) {}

  /** The fields, `reason` cut to `MAX_LOGGED_LENGTH` characters like every logged value. */
  toJSON(): TurnEndFields {
    const { reason } = this.fields;
    if (reason === undefined || reason.length <= MAX_LOGGED_LENGTH) return this.fields;
    const cut = `${reason.slice(0, MAX_LOGGED_LENGTH)}… (${reason.length} chars)`;
    return { ...this.fields, reason: cut };
  }

  /** One line: `turn <id> session "<id>" ended <outcome> in <ms> ms: <counts>[; stop][; trace]`. */
  toString(): string {
    const f = this.fields;
    const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
    const parts = [
      plural(f.modelCalls, 'model call'),
      plural(f.toolCalls, 'tool call'),
      `tokens ${f.tokens.prompt} prompt / ${f.tokens.completion} completion`,
    ];
    if (f.used !== undefined && f.usageRatio !== undefined) {
      parts.push(`context ${f.used} used (${(f.usageRatio * 100).toFixed(1)}%)`);
    }
    let line =
      `turn ${f.turnId} session ${escapeForLog(f.sessionId)} ended ${f.outcome} ` +
      `in ${f.durationMs} ms: ${parts.join(', ')}`;
    if (f.by) line += `; stopped by ${escapeForLog(`${f.by.platform}:${f.by.userId}`)}`;
    if (f.reason) line += ` (reason: ${escapeForLog(f.reason)})`;
    if (f.traceId) line += `; trace ${f.traceId}`;
    return line;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

/** The trace id of the active span context, when it is a valid one (a tracing SDK runs). */
export function activeTraceId(): string | undefined {
  const span = trace.getSpanContext(context.active());
  return span && isSpanContextValid(span) ? span.traceId : undefined;
}

/** The turn-end log line of a turn that ended with `outcome`. */
export function turnEndLog(state: TurnState, outcome: TurnOutcome): TurnEndLog {
  const { turn, lastUsage } = state;
  const fields: TurnEndFields = {
    sessionId: turn.sessionId,
    turnId: turn.id,
    outcome,
    durationMs: Math.round(performance.now() - state.startedAt),
    modelCalls: state.calls,
    toolCalls: state.toolCalls,
    tokens: { prompt: state.promptTokens, completion: state.completionTokens },
  };
  if (lastUsage) {
    fields.used = lastUsage.used;
    fields.usageRatio = Math.round(lastUsage.usageRatio * 10_000) / 10_000;
  }
  const stop = turn.stop;
  if (stop?.by) fields.by = { platform: stop.by.platform, userId: stop.by.userId };
  if (stop?.reason) fields.reason = stop.reason;
  const traceId = activeTraceId();
  if (traceId) fields.traceId = traceId;
  return new TurnEndLog(fields);
}
