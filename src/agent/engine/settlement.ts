import { Logger } from '@nestjs/common';
import { escapeForLog, type IncomingMessage, type Settlement } from '../../contracts';
import { Deferred } from './deferred';
import type { EnginePorts } from './ports';
import type { PendingInput } from './turn';

const logger = new Logger('Inbox');

/** A new input on its way, not settled and in no turn yet. */
export function pendingInput(message: IncomingMessage): PendingInput {
  return { message, settlement: new Deferred<Settlement>() };
}

/**
 * The one door through which an input settles (S1, I9): resolves it, once, sends the stream-end
 * marker of an input that never entered a turn (dropped or discarded), once (an input of a turn
 * shares that turn's marker), and records the settlement in the inbox, where the input has been
 * durable since its acceptance (the write's outcome is kept as `input.recorded`, for a dispatcher
 * that must not let a session go before the inbox has it). Returns the input's settlement.
 */
export function settleInput(
  ports: Pick<EnginePorts, 'events' | 'inbox'>,
  input: PendingInput,
  settlement: Settlement,
): Promise<Settlement> {
  if (!input.settlement.settled) {
    const { id, sessionId } = input.message;
    if (input.turnId === undefined) ports.events.emit('outbound:stream', { sessionId, done: true });
    input.settlement.resolve(settlement);
    input.recorded =
      id === undefined
        ? Promise.resolve(false)
        : ports.inbox.settle([id], settlement).then(
            () => true,
            (error: unknown) => {
              logger.error(
                `Could not record the settlement of input ${escapeForLog(id)}: ${String(error)}`,
              );
              return false;
            },
          );
  }
  return input.settlement.promise;
}
