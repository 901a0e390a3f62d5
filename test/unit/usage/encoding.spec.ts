import { get_encoding } from 'tiktoken';
import { MAX_ENCODE_PIECE, splitForCounting } from '../../../src/usage/encoding';
import { TokenEstimator } from '../../../src/usage/token-estimator';

describe('splitForCounting', () => {
  it('keeps short texts whole and cuts long ones into pieces that join back to the text', () => {
    expect(splitForCounting('short')).toEqual(['short']);
    const text = 'word '.repeat(3000) + 'x'.repeat(5000) + '😀'.repeat(1500);
    const pieces = splitForCounting(text, 2000);
    expect(pieces.join('')).toBe(text);
    expect(pieces.every((p) => p.length <= 2000)).toBe(true);
    expect(pieces.every((p) => !/^[\udc00-\udfff]/.test(p))).toBe(true);
  });

  it('the piecewise count of ordinary text equals the whole count', () => {
    const enc = get_encoding('cl100k_base');
    const estimator = new TokenEstimator();
    try {
      const text = Array.from({ length: 4000 }, (_, i) => `token${i % 97} and more.`).join(' ');
      expect(text.length).toBeGreaterThan(MAX_ENCODE_PIECE * 10);
      expect(estimator.countText(text, 'cl100k_base')).toBe(enc.encode_ordinary(text).length);
    } finally {
      enc.free();
      void estimator.dispose();
    }
  });

  it('a long run without breaks is encoded in bounded pieces (BPE cost grows faster than linearly)', () => {
    const estimator = new TokenEstimator();
    const lengths: number[] = [];
    const slot = (estimator as any).encoding('cl100k_base');
    const original = slot.encoder;
    slot.encoder = (text: string) => {
      lengths.push(text.length);
      return original(text);
    };
    try {
      expect(estimator.countText('a'.repeat(100_000), 'cl100k_base')).toBeGreaterThan(0);
      expect(Math.max(...lengths)).toBeLessThanOrEqual(MAX_ENCODE_PIECE);
      expect(lengths.reduce((a, b) => a + b, 0)).toBe(100_000);
    } finally {
      slot.encoder = original;
      void estimator.dispose();
    }
  });
});
