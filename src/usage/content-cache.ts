/** Texts up to this many characters are cached by content. */
export const CONTENT_CACHE_MAX_TEXT = 262_144;
/** Characters of cached texts kept per encoding (they are the keys: about 2 bytes each). */
export const CONTENT_CACHE_BUDGET = 4_000_000;

/**
 * Token counts by text, for one encoding: constant text (system prompt, contributions, tool
 * definitions, role names) and history read back from any store are counted once per process.
 * Bounded by the characters it keeps; the oldest entries go first.
 */
export class ContentCache {
  private readonly counts = new Map<string, number>();
  private chars = 0;

  get(text: string): number | undefined {
    return this.counts.get(text);
  }

  set(text: string, count: number): void {
    if (text.length > CONTENT_CACHE_MAX_TEXT || this.counts.has(text)) return;
    this.counts.set(text, count);
    this.chars += text.length;
    for (const oldest of this.counts.keys()) {
      if (this.chars <= CONTENT_CACHE_BUDGET) break;
      this.counts.delete(oldest);
      this.chars -= oldest.length;
    }
  }

  clear(): void {
    this.counts.clear();
    this.chars = 0;
  }
}
