import type { IncomingMessage, Settlement } from '../../contracts';
import { Deferred } from './deferred';
import type { EnginePorts } from './ports';
import type { PendingInput } from './turn';

/** A new input on its way, not settled and in no turn yet. */
export function pendingInput(message: IncomingMessage): PendingInput {
  return { message, settlement: new Deferred<Settlement>() };
}

/**
 * The one door through which an input settles (S1, I9): resolves it, once, and sends the
 * stream-end marker of an input that never entered a turn (dropped or discarded), once; an input
 * of a turn shares that turn's marker. Returns the input's settlement.
 */
export function settleInput(
  events: EnginePorts['events'],
  input: PendingInput,
  settlement: Settlement,
): Promise<Settlement> {
  if (!input.settlement.settled) {
    if (input.turnId === undefined) {
      events.emit('outbound:stream', { sessionId: input.message.sessionId, done: true });
    }
    input.settlement.resolve(settlement);
  }
  return input.settlement.promise;
}
