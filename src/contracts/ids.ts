import { randomUUID } from 'node:crypto';

/**
 * A new random UUID, as one flat string. `randomUUID()` builds its text by concatenation, so
 * V8 keeps it as a tree of string pieces: about 490 bytes for each id held, against 67 once
 * flattened (reading a character flattens it; the next collection drops the tree). Ids that
 * are kept (message, turn, input and tool-call ids) come from here.
 * @internal
 */
export function newId(): string {
  const id = randomUUID();
  id.charCodeAt(0);
  return id;
}
