import { newId } from '../../../src/contracts/ids';

/** RFC 9562 version 4: 8-4-4-4-12 lower-case hex, version nibble 4, variant bits 10. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newId', () => {
  it('makes version-4 UUIDs, all different, across many refills of its random bytes', () => {
    const ids = Array.from({ length: 5000 }, () => newId());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('spreads its random bits: every hex digit appears at every random position', () => {
    const ids = Array.from({ length: 4000 }, () => newId());
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (const id of ids) [...id].forEach((c, i) => seen[i].add(c));
    [...'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'].forEach((pattern, i) => {
      const expected = pattern === 'x' ? 16 : pattern === 'y' ? 4 : 1;
      expect(seen[i].size).toBe(expected);
    });
  });
});
