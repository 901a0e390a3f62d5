import type { IncomingMessage, ModelMessage } from '../../contracts';
import type { LaneHandle, TurnDeps } from './turn-deps';
import { archivedInput, inputToModelMessage, type TurnState } from './turn-state';

/**
 * Archives the opening inputs in order with the turn id and entry `opened` (P3) and sets each
 * `TurnInput.archived` (H1).
 */
export async function archiveOpening(deps: TurnDeps, state: TurnState): Promise<void> {
  const { turn } = state;
  const stored = await deps.archive.append(
    turn.inputs.map((i) =>
      archivedInput(
        i.message,
        { turnId: turn.id, entry: 'opened' },
        state.countFor(deps.estimator, asModel(state, i.message)),
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
  deps: TurnDeps,
  state: TurnState,
  lane: LaneHandle,
): Promise<void> {
  const joining = lane.takePending();
  if (!joining.length) return;
  const { turn } = state;
  const added = joining.map((p) => turn.add(p));
  const models = joining.map((p) => asModel(state, p.message));
  const stored = await deps.archive.append(
    joining.map((p, i) =>
      archivedInput(
        p.message,
        { turnId: turn.id, entry: 'joined' },
        state.countFor(deps.estimator, models[i]),
      ),
    ),
  );
  stored.forEach((m, i) => (added[i].archived = m));
  state.historyAdded += joining.length;
  state.working.push(...models);
}

function asModel(state: TurnState, message: IncomingMessage): ModelMessage {
  return inputToModelMessage(message, state.acceptsImages, state.isRoom);
}
