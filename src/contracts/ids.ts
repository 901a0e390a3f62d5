import { randomFillSync } from 'node:crypto';

/** Random bytes for 256 ids at a time, from the operating system's CSPRNG (as `randomUUID`). */
const random = Buffer.alloc(16 * 256);
let used = random.length;
/** The 36 characters of the id being written. */
const text = Buffer.alloc(36);
const HEX = Buffer.from('0123456789abcdef', 'latin1');

/**
 * A new random (version 4) UUID, lower-case, as one flat string. `randomUUID()` builds its text
 * by concatenating 16 pieces, which V8 keeps as a tree of strings (about 490 bytes per id held,
 * and as much garbage per id made); this writes the 36 characters into a buffer and reads them
 * out as one string (about 50 bytes), from the same kind of random bytes, taken from the
 * CSPRNG 256 ids at a time. Ids that are kept (message, turn, input and tool-call ids) come
 * from here.
 * @internal
 */
export function newId(): string {
  if (used === random.length) {
    randomFillSync(random);
    used = 0;
  }
  let at = 0;
  for (let i = 0; i < 16; i++) {
    // 8-4-4-4-12: a dash before bytes 4, 6, 8 and 10.
    if (i === 4 || i === 6 || i === 8 || i === 10) text[at++] = 0x2d;
    let byte = random[used + i];
    // Version 4 in byte 6, variant 10xx (RFC 9562) in byte 8.
    if (i === 6) byte = (byte & 0x0f) | 0x40;
    else if (i === 8) byte = (byte & 0x3f) | 0x80;
    text[at++] = HEX[byte >> 4];
    text[at++] = HEX[byte & 0x0f];
  }
  used += 16;
  return text.toString('latin1', 0, 36);
}
