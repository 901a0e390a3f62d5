import type { IncomingMessage, ModelMessage } from '../../../contracts';
import type { EnginePorts, LaneHandle } from '../ports';
import { archivedInput, inputToModelMessage, isArchivable, type TurnState } from '../turn-state';

/** What archiving inputs uses. */
export type InputStepPorts = Pick<
  EnginePorts,
  'archive' | 'estimator' | 'inbox' | 'instrumentation'
>;

/**
 * Archives the opening inputs in order with the turn id and entry `opened` (P3), sets each
 * `TurnInput.archived` (H1) and keeps their model messages for the prompt.
 */
export async function archiveOpening(ports: InputStepPorts, state: TurnState): Promise<void> {
  const { turn } = state;
  const models = turn.inputs.map((i) => asModel(state, i.message));
  state.openingMessages = models;
  // Recorded before archiving: a crash from here on leaves a turn to close, never an input to
  // archive a second time.
  await ports.inbox.enterTurn(idsOf(turn.inputs.map((i) => i.message)), turn.id);
  // H1: an idle topic opener (a sourced input, so alone in its turn) is never archived, so a
  // stopped idle turn with nothing else in history writes no stop marker (P5).
  if (!turn.inputs.every((i) => isArchivable(i.message))) return;
  const stamping = state.stampCounts(ports.estimator, models);
  if (stamping) await stamping;
  const stored = await ports.archive.append(
    turn.inputs.map((i, at) =>
      archivedInput(
        i.message,
        { turnId: turn.id, entry: 'opened' },
        state.countFor(ports.estimator, models[at]),
      ),
    ),
  );
  stored.forEach((m, i) => (turn.inputs[i].archived = m));
  state.persistedAny = true;
}

/**
 * Pending insertions join the running turn before a model call (S2, I2): appended to the live
 * inputs, archived with entry `joined`, and added to the working list as user messages.
 */
export async function joinPending(
  ports: InputStepPorts,
  state: TurnState,
  lane: LaneHandle,
): Promise<void> {
  const joining = lane.takePending();
  if (!joining.length) return;
  const { turn } = state;
  const added = joining.map((p) => turn.add(p));
  for (const p of joining) {
    ports.instrumentation.joined({ sessionId: turn.sessionId, turnId: turn.id, input: p.message });
  }
  await ports.inbox.enterTurn(idsOf(joining.map((p) => p.message)), turn.id);
  const models = joining.map((p) => asModel(state, p.message));
  const stamping = state.stampCounts(ports.estimator, models);
  if (stamping) await stamping;
  const stored = await ports.archive.append(
    joining.map((p, i) =>
      archivedInput(
        p.message,
        { turnId: turn.id, entry: 'joined' },
        state.countFor(ports.estimator, models[i]),
      ),
    ),
  );
  stored.forEach((m, i) => (added[i].archived = m));
  state.historyAdded += joining.length;
  state.working.push(...models);
}

function idsOf(messages: IncomingMessage[]): string[] {
  const ids: string[] = [];
  for (const m of messages) if (m.id !== undefined) ids.push(m.id);
  return ids;
}

function asModel(state: TurnState, message: IncomingMessage): ModelMessage {
  return inputToModelMessage(message, state.acceptsImages, state.isRoom);
}
