import {
  isoNow,
  ControlKinds,
  WellKnownMetadataKeys,
  type ModelMessage,
  type NewMessage,
  type TurnEnd,
  type TurnRecord,
} from '../../../contracts';
import type { EnginePorts } from '../ports';
import type { FinalReply, TurnState } from '../turn-state';

/** Read once: a re-exported binding is a getter call on every access. */
const K = WellKnownMetadataKeys;

/** The part of a `TurnEnd` its bookkeeping reads. */
export type Ending = Pick<TurnEnd, 'outcome' | 'error'>;

/** The turn record (P4, I7): outcome, source, error; `by` for a person's stop. */
export function turnRecord(state: TurnState, ending: Ending): TurnRecord {
  const record: TurnRecord = { outcome: ending.outcome };
  if (state.turn.source !== undefined) record.source = state.turn.source;
  if (ending.error) record.error = ending.error;
  if (ending.outcome === 'aborted' && state.turn.stop?.by) record.by = state.turn.stop.by;
  return record;
}

/**
 * Persists the final reply with its P1 metadata and the turn record (P4), then sends it as
 * `outbound:message` with the turn id. Replied is "persisted after the last model call" (H4).
 */
export async function deliverReply(
  deps: Pick<EnginePorts, 'archive' | 'events' | 'estimator' | 'options'>,
  state: TurnState,
  reply: FinalReply,
): Promise<void> {
  const lead = state.lead;
  const ref = state.model!.ref;
  const tokens = { prompt: state.promptTokens, completion: state.completionTokens };
  const metadata: Record<string, unknown> = {
    [K.TurnId]: state.turn.id,
    [K.TurnRecord]: turnRecord(state, { outcome: 'replied' }),
    [K.Model]: ref,
    [K.Tokens]: tokens,
  };
  const optional: [string, unknown][] = [
    [K.Platform, lead.platform],
    [K.SelfId, deps.options.selfId],
    [K.GroupId, lead.groupId],
    [K.SessionKind, lead.sessionKind ?? state.settings?.kind],
    [K.VisibleContent, reply.visibleContent],
    [K.Segments, state.segments.length ? state.segments : undefined],
  ];
  for (const [key, value] of optional) if (value !== undefined) metadata[key] = value;
  const reasoning = state.reasoning.join('\n---\n') || undefined;
  const asSent: ModelMessage = {
    role: 'assistant',
    content: reply.stored,
    ...(reasoning ? { reasoningContent: reasoning } : {}),
  };
  const stamping = state.stampCounts(deps.estimator, [asSent]);
  if (stamping) await stamping;
  const count = state.countFor(deps.estimator, asSent);
  if (count) metadata[K.TokenCount] = count;
  await deps.archive.append([
    {
      sessionId: state.sessionId,
      role: 'assistant',
      content: reply.stored,
      ...(reasoning ? { reasoningContent: reasoning } : {}),
      metadata,
    },
  ]);
  deps.events.emit('outbound:message', {
    sessionId: state.sessionId,
    turnId: state.turn.id,
    content: reply.visible,
    source: 'agent',
    platform: lead.platform,
    ...(reasoning ? { reasoningContent: reasoning } : {}),
    ...(state.segments.length ? { segments: state.segments } : {}),
    model: ref,
    tokens,
  });
}

/**
 * For a turn without a persisted reply: the stop marker (P5) when the aborted turn already has
 * inputs or tool groups in history, then the event marker carrying the turn record (P4), in one
 * atomic write.
 */
export async function persistMarkers(
  deps: Pick<EnginePorts, 'archive'>,
  state: TurnState,
  ending: Ending,
): Promise<void> {
  const stopped = ending.outcome === 'aborted' && state.persistedAny;
  await deps.archive.append(
    closingMarkers(state.sessionId, state.turn.id, turnRecord(state, ending), {
      stopped,
      by: state.turn.stop?.by,
    }),
  );
}

/**
 * The markers that close a turn without a persisted reply: the stop marker for the next model
 * (P5) when `stopped` (its inputs or tool groups are in history and were not answered), then
 * the event marker carrying the turn record (P4). Also used to close a turn a crash interrupted.
 */
export function closingMarkers(
  sessionId: string,
  turnId: string,
  record: TurnRecord,
  stop: { stopped: boolean; by?: TurnRecord['by']; interrupted?: boolean },
): NewMessage[] {
  const markers: NewMessage[] = [];
  if (stop.stopped) {
    const { by } = stop;
    const how = stop.interrupted
      ? 'was interrupted by a restart'
      : by
        ? `was stopped by ${by.platform}:${by.userId}`
        : 'was stopped';
    markers.push({
      sessionId,
      role: 'system',
      kind: ControlKinds.TurnStopped,
      content: `[The previous turn ${how} before it finished; the messages above it were not answered.]`,
      metadata: { [K.TurnId]: turnId, ...(by ? { [K.StoppedBy]: by } : {}) },
    });
  }
  markers.push({
    sessionId,
    role: 'system',
    kind: ControlKinds.EventMarker,
    content: '',
    metadata: { [K.TurnId]: turnId, [K.TurnRecord]: record },
  });
  return markers;
}

/** Sends the turn's stream-end marker, once (I9). */
export function endStream(deps: Pick<EnginePorts, 'events'>, state: TurnState): void {
  if (state.turn.streamEnded) return;
  state.turn.streamEnded = true;
  deps.events.emit('outbound:stream', {
    sessionId: state.sessionId,
    turnId: state.turn.id,
    seq: ++state.turn.seq,
    done: true,
  });
}

/**
 * One sentence for the `[error]` notice: what failed, no stack trace. The first non-blank line
 * of the message, sentence breaks inside it folded (`A. B` -> `A; B`), cut to 300 characters.
 */
export function errorNotice(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = message
    .split('\n')
    .map((l) => l.trim())
    .find(Boolean);
  const reason = (line ?? 'unknown error')
    .replace(/\s+/g, ' ')
    .replace(/([.!?])\s+(?=\S)/g, (_match, stop: string) =>
      stop === '.' ? '; ' : `${stop} `.replace(/[!?] $/, ';'),
    )
    .slice(0, 300)
    .replace(/[.\s;]+$/, '');
  return `[error] The turn failed: ${reason}.`;
}

/**
 * For a turn that ended without a delivered reply: the notice to the session (`[error]` or
 * `[system]`, H4), then its markers (P4, P5). A failing store is logged, never rethrown: the
 * turn has ended already.
 */
export async function closeUnanswered(
  deps: Pick<EnginePorts, 'archive' | 'events'>,
  state: TurnState,
  end: TurnEnd,
  log: (line: string) => void,
): Promise<void> {
  if (end.error) {
    deps.events.emit('outbound:message', {
      sessionId: state.sessionId,
      turnId: state.turn.id,
      content: end.error,
      source: 'system',
      platform: state.platform,
    });
  }
  await persistMarkers(deps, state, end).catch((error: unknown) =>
    log(`turn ${state.turn.id}: could not persist its markers: ${String(error)}`),
  );
}

/** H4: the session keeps the record of its last turn (with the error sentence on `error`). */
export async function recordLastTurn(
  deps: Pick<EnginePorts, 'sessions'>,
  state: TurnState,
  end: TurnEnd,
  log: (line: string) => void,
): Promise<void> {
  const lastTurn = {
    turnId: state.turn.id,
    ...turnRecord(state, end),
    endedAt: isoNow(),
  };
  await deps.sessions
    .update(state.sessionId, { lastTurn })
    .catch((error: unknown) =>
      log(`turn ${state.turn.id}: could not record the session's last turn: ${String(error)}`),
    );
}
