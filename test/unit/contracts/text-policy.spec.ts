import fc from 'fast-check';
import { normaliseDeep, normaliseText } from '../../../src/contracts';

// The policy lives in contracts (every store and the agent share it); it is specified here,
// next to the stores that apply it on every write.
describe('text policy', () => {
  describe('normaliseText', () => {
    it('replaces U+0000 with U+FFFD', () => {
      expect(normaliseText('a\u0000b\u0000')).toBe('a\uFFFDb\uFFFD');
    });

    it('replaces a lone high surrogate, at the end or before a non-surrogate', () => {
      expect(normaliseText('x\uD83D')).toBe('x\uFFFD');
      expect(normaliseText('\uD83Dx')).toBe('\uFFFDx');
      expect(normaliseText('\uD83D\uD83D')).toBe('\uFFFD\uFFFD');
    });

    it('replaces a lone low surrogate, at the start or after a non-surrogate', () => {
      expect(normaliseText('\uDE00x')).toBe('\uFFFDx');
      expect(normaliseText('x\uDE00')).toBe('x\uFFFD');
      expect(normaliseText('\uDE00\uDE00')).toBe('\uFFFD\uFFFD');
    });

    it('keeps valid surrogate pairs, also next to lone ones', () => {
      expect(normaliseText('\u{1F600}')).toBe('\u{1F600}');
      // high, then a pair: the first high is lone.
      expect(normaliseText('\uD83D\uD83D\uDE00')).toBe('\uFFFD\u{1F600}');
      // a pair, then a low: the last low is lone.
      expect(normaliseText('\uD83D\uDE00\uDE00')).toBe('\u{1F600}\uFFFD');
    });

    it('one U+FFFD per code unit: the length never changes', () => {
      const text = '\u0000\uD800\uDC00\uDFFF\uDBFF a \u0001 \uFFFD';
      expect(normaliseText(text)).toHaveLength(text.length);
      expect(normaliseText(text)).toBe('\uFFFD\u{10000}\uFFFD\uFFFD a \u0001 \uFFFD');
    });

    it('keeps other control characters and non-BMP text as they are', () => {
      const text = 'tab\t nl\n \u0001\u001F\u007F naïve 数据 \u{1F600}\u{10FFFF}';
      expect(normaliseText(text)).toBe(text);
    });

    it('matches the platform: the result is well-formed, as String#toWellFormed makes it', () => {
      const samples = ['\uD800', '\uDC00a', 'a\uD800\uDC00b\uDBFF', '\uDBFF\uDFFF\uDFFF'];
      for (const text of samples) {
        const platform = (text as unknown as { toWellFormed(): string }).toWellFormed();
        expect(normaliseText(text)).toBe(platform);
      }
    });

    it('any mix of NUL, surrogates and text: U+0000 replaced, the rest as toWellFormed makes it', () => {
      const unit = fc.constantFrom('\u0000', '\uD800', '\uDBFF', '\uDC00', '\uDFFF', 'a', '\uFFFD');
      fc.assert(
        fc.property(fc.array(unit, { maxLength: 12 }), (units) => {
          const text = units.join('');
          const platform = (text as unknown as { toWellFormed(): string }).toWellFormed();
          const expected = platform.replaceAll('\u0000', '\uFFFD');
          expect(normaliseText(text)).toBe(expected);
          // Unchanged text is the same string, not a copy.
          if (expected === text) expect(normaliseText(text)).toBe(text);
        }),
      );
    });
  });

  describe('normaliseDeep', () => {
    it('normalises strings in nested plain objects and arrays, keys too', () => {
      expect(
        normaliseDeep({ 'k\u0000': ['a\uD800', { deep: '\uDC00', n: 1, t: true, z: null }] }),
      ).toEqual({ 'k\uFFFD': ['a\uFFFD', { deep: '\uFFFD', n: 1, t: true, z: null }] });
    });

    it('returns the value itself when nothing changes', () => {
      const value = { a: ['x', { b: 'y' }], c: 1 };
      expect(normaliseDeep(value)).toBe(value);
    });

    it('copies only the changed path and never mutates the input', () => {
      const kept = { b: 'y' };
      const value = { a: 'x\u0000', kept };
      const result = normaliseDeep(value);

      expect(result).not.toBe(value);
      expect(result.kept).toBe(kept);
      expect(value.a).toBe('x\u0000');
    });

    it('leaves other objects as they are and does not follow cycles', () => {
      const date = new Date(0);
      const cyclic: Record<string, unknown> = { s: 'ok' };
      cyclic.self = cyclic;

      expect(normaliseDeep({ date }).date).toBe(date);
      expect(normaliseDeep(cyclic)).toBe(cyclic);
      expect(normaliseDeep('\u0000')).toBe('\uFFFD');
      expect(normaliseDeep(42)).toBe(42);
      expect(normaliseDeep(undefined)).toBeUndefined();
    });
  });
});
