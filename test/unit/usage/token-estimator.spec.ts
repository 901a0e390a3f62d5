import { Test } from '@nestjs/testing';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import { BytePairEncodingCore } from 'gpt-tokenizer/cjs/BytePairEncodingCore';
import type { ModelMessage, ToolDefinition } from '../../../src/contracts';
import { TOKEN_ESTIMATOR_OPTIONS, TokenEstimator } from '../../../src/usage/token-estimator';
import { UsageTracker } from '../../../src/usage/usage.tracker';

/**
 * How often each encoding's BPE module was loaded (its ranks are the heavy part). Kept on
 * `globalThis`: the mock factories run while the imports above are resolved, before this
 * file's own statements.
 */
function loadsOf(): Record<string, number> {
  const holder = globalThis as { encodingLoads?: Record<string, number> };
  return (holder.encodingLoads ??= { o200k_base: 0, cl100k_base: 0 });
}
jest.mock('gpt-tokenizer/cjs/encoding/o200k_base', () => {
  loadsOf().o200k_base++;
  return jest.requireActual('gpt-tokenizer/cjs/encoding/o200k_base');
});
jest.mock('gpt-tokenizer/cjs/encoding/cl100k_base', () => {
  loadsOf().cl100k_base++;
  return jest.requireActual('gpt-tokenizer/cjs/encoding/cl100k_base');
});

/** Every text the estimator's encoder counts on this thread (either encoding). */
const spyEncodes = () => jest.spyOn(BytePairEncodingCore.prototype, 'countNative');

const actual = jest.requireActual<typeof import('tiktoken')>('tiktoken');
/** Reference encoders, independent of the code under test. */
const ref = { o200k_base: actual.get_encoding('o200k_base') };
const raw = (text: string): number => ref.o200k_base.encode(text).length;
/** The documented message formula: 3 + role + content (+ reasoning) (+ 3 + name + args per call). */
const rawMessage = (m: ModelMessage): number =>
  3 +
  raw(m.role) +
  raw(m.content) +
  (m.reasoningContent ? raw(m.reasoningContent) : 0) +
  (m.toolCalls ?? []).reduce(
    (sum, c) => sum + 3 + raw(c.function.name) + raw(c.function.arguments),
    0,
  );

afterAll(() => ref.o200k_base.free());

/** Deterministic text of about `chars` characters. */
function text(chars: number, seed = 1): string {
  const words = ['alpha', 'token', 'budget', 'river', 'Zeitung', '数据', 'quux', '42', 'naïve'];
  let out = '';
  let x = seed;
  while (out.length < chars) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += words[x % words.length] + (x % 7 === 0 ? '.\n' : ' ');
  }
  return out.slice(0, chars);
}

describe('TokenEstimator', () => {
  let estimator: TokenEstimator;
  let loadsAtStart: Record<string, number>;

  beforeAll(() => {
    estimator = new TokenEstimator();
    loadsAtStart = { ...loadsOf() };
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => estimator.dispose());

  it('loads both encodings once per process, at start-up, not on first use', async () => {
    expect(loadsAtStart).toEqual({ o200k_base: 1, cl100k_base: 1 });
    estimator.countText('hello', 'o200k_base');
    estimator.countText('hello', 'cl100k_base');
    await estimator.countTextAsync(text(30_000), 'o200k_base');
    const another = new TokenEstimator();
    expect(another.countText('hello again', 'cl100k_base')).toBe(
      actual.get_encoding('cl100k_base').encode_ordinary('hello again').length,
    );
    await another.dispose();
    expect(loadsOf()).toEqual({ o200k_base: 1, cl100k_base: 1 });
  });

  it('importing the package loads no encoding: the first estimator of a process does', () => {
    // A process of its own: this file's module registry has loaded them already.
    const probe = [
      'const loaded = () => Object.keys(require.cache).filter((p) => /gpt-tokenizer.cjs.encoding.(o200k|cl100k)_base[.]js$/.test(p)).length;',
      "const lib = require('./src');",
      'const atImport = loaded();',
      'const estimator = new lib.TokenEstimator();',
      'console.log(JSON.stringify({ atImport, atEstimator: loaded() }));',
      'estimator.dispose();',
    ].join('\n');
    const out = execFileSync(process.execPath, ['-r', '@swc-node/register', '-e', probe], {
      cwd: join(__dirname, '../../..'),
      encoding: 'utf8',
    });
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ atImport: 0, atEstimator: 2 });
  });

  it('encodingFor: o200k_base for gpt-4o / 4.1 / 5 / o-series, cl100k_base otherwise, never throws', () => {
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1-nano', 'gpt-5', 'o1-mini', 'o3', 'o4-mini'])
      expect(estimator.encodingFor(m)).toBe('o200k_base');
    expect(estimator.encodingFor('openai/gpt-4o')).toBe('o200k_base');
    for (const m of ['gpt-4', 'gpt-3.5-turbo', 'claude-sonnet-4', 'deepseek-chat', '', 'x/y/z'])
      expect(estimator.encodingFor(m)).toBe('cl100k_base');
    expect(estimator.encodingFor('claude-sonnet-4', 'o200k_base')).toBe('o200k_base');
    expect(() => estimator.encodingFor(undefined as unknown as string)).not.toThrow();
  });

  it('counts text exactly as tiktoken does, special markers as ordinary text', () => {
    const sample = text(5_000, 7);
    expect(estimator.countText(sample, 'o200k_base')).toBe(raw(sample));
    expect(estimator.countText('', 'o200k_base')).toBe(0);
    expect(estimator.countText('a <|endoftext|> b', 'o200k_base')).toBe(
      ref.o200k_base.encode_ordinary('a <|endoftext|> b').length,
    );
    const cl = actual.get_encoding('cl100k_base');
    expect(estimator.countText(sample, 'cl100k_base')).toBe(cl.encode(sample).length);
    cl.free();
  });

  it('counts any text as tiktoken encode_ordinary does, in both encodings, inline and in the workers', async () => {
    const cl = actual.get_encoding('cl100k_base');
    const oracle = { o200k_base: ref.o200k_base, cl100k_base: cl };
    const markers = [
      '<|endoftext|>',
      '<|im_start|>',
      '<|im_sep|>',
      '<|fim_prefix|>',
      '<|endofprompt|>',
    ];
    // Text of every kind a message holds: words, digits, CJK, emoji, lone surrogates, U+0000,
    // runs of blanks and newlines, and special-token markers typed as text.
    const piece = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 30 }),
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.constantFrom(...markers, '  ', '\n\n', '\r\n\t', '12345678', "don't", '\u0000', '\ud800'),
      fc.stringMatching(/^[a-zA-Z ]{0,40}$/),
    );
    const texts = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(''));
    const fresh = new TokenEstimator({ workerThreshold: 200 });
    try {
      await fc.assert(
        fc.asyncProperty(texts, fc.constantFrom('o200k_base', 'cl100k_base'), async (t, enc) => {
          const expected = oracle[enc].encode_ordinary(t).length;
          expect(fresh.countText(t, enc as 'o200k_base')).toBe(expected);
          // Longer than the threshold: counted in a worker thread (a fresh text, not cached).
          const padded = `${t} ${'padding '.repeat(30)}`;
          await expect(fresh.countTextAsync(padded, enc as 'o200k_base')).resolves.toBe(
            oracle[enc].encode_ordinary(padded).length,
          );
        }),
        { numRuns: 300 },
      );
    } finally {
      cl.free();
      await fresh.dispose();
    }
  });

  it('U2: counts a message in the chat format (3 + role + content, tool calls, reasoning; images not counted)', () => {
    expect(estimator.countMessages([{ role: 'user', content: 'hello world' }], 'o200k_base')).toBe(
      9,
    );
    const assistant: ModelMessage = {
      role: 'assistant',
      content: 'Let me look that up.',
      reasoningContent: 'The user wants the weather in Paris.',
      toolCalls: [
        {
          id: 'c1',
          type: 'function',
          function: { name: 'weather', arguments: '{"city":"Paris"}' },
        },
        { id: 'c2', type: 'function', function: { name: 'time', arguments: '{"tz":"CET"}' } },
      ],
    };
    expect(estimator.countMessage(assistant, 'o200k_base')).toBe(rawMessage(assistant));
    const withImage: ModelMessage = {
      role: 'user',
      content: 'look',
      images: ['data:image/png;base64,AAAA'],
    };
    expect(estimator.countMessage(withImage, 'o200k_base')).toBe(3 + raw('user') + raw('look'));
    const list: ModelMessage[] = [
      { role: 'system', content: text(800, 3) },
      assistant,
      { role: 'tool', content: '{"temp":21}', toolCallId: 'c1' },
    ];
    expect(estimator.countMessages(list, 'o200k_base')).toBe(
      list.reduce((sum, m) => sum + rawMessage(m), 0) + 3,
    );
  });

  it('computes a message count once (cached by identity)', () => {
    const message: ModelMessage = { role: 'user', content: text(2_000, 11) };
    const spy = spyEncodes();
    const first = estimator.countMessage(message, 'o200k_base');
    expect(spy).toHaveBeenCalled();
    spy.mockClear();
    expect(estimator.countMessage(message, 'o200k_base')).toBe(first);
    expect(estimator.countMessages([message, message], 'o200k_base')).toBe(2 * first + 3);
    expect(spy).not.toHaveBeenCalled();
    estimator.countMessage(message, 'cl100k_base');
    expect(spy).toHaveBeenCalled();
    spy.mockClear();
    estimator.clearCache();
    expect(estimator.countMessage(message, 'o200k_base')).toBe(first);
    expect(spy).toHaveBeenCalled();
  });

  it('honours a persisted metadata.tokenCount without encoding, and offers one to persist', () => {
    const message: ModelMessage = { role: 'user', content: 'persist me please' };
    const counts = estimator.persistableCount(message, 'o200k_base');
    expect(counts).toEqual({ o200k_base: rawMessage(message) });
    const loaded: ModelMessage = { ...message, metadata: { tokenCount: { o200k_base: 777 } } };
    const spy = spyEncodes();
    expect(estimator.countMessage(loaded, 'o200k_base')).toBe(777);
    expect(spy).not.toHaveBeenCalled();
    expect(estimator.persistableCount(loaded, 'cl100k_base')).toEqual({
      o200k_base: 777,
      cl100k_base: estimator.countMessage(message, 'cl100k_base'),
    });
    const bogus: ModelMessage = { ...message, metadata: { tokenCount: { o200k_base: 'x' } } };
    expect(estimator.countMessage(bogus, 'o200k_base')).toBe(rawMessage(message));
  });

  it('counts tool definitions as JSON plus 4 per tool, 0 for none, cached per definition (a copied list costs no encoding)', () => {
    const tools: ToolDefinition[] = [
      {
        name: 'weather',
        description: 'Current weather of a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
      },
      { name: 'noop', description: '', parameters: {} },
    ];
    const expected = tools.reduce(
      (sum, t) =>
        sum +
        4 +
        raw(JSON.stringify({ name: t.name, description: t.description, parameters: t.parameters })),
      0,
    );
    expect(estimator.countTools(tools, 'o200k_base')).toBe(expected);
    expect(estimator.countTools([], 'o200k_base')).toBe(0);
    const spy = spyEncodes();
    expect(estimator.countTools(tools, 'o200k_base')).toBe(expected);
    expect(estimator.countTools([...tools], 'o200k_base')).toBe(expected);
    expect(spy).not.toHaveBeenCalled();
  });

  it('texts are cached by content: fresh messages with known texts (a host store) cost no encoding', () => {
    const stored = (): ModelMessage[] =>
      JSON.parse(
        JSON.stringify([
          { role: 'system', content: 'You are a careful assistant for the content cache.' },
          { role: 'user', content: 'What does the content cache keep?' },
          {
            role: 'assistant',
            content: '',
            toolCalls: [
              { id: 'c9', type: 'function', function: { name: 'look', arguments: '{}' } },
            ],
          },
          { role: 'tool', content: 'token counts by text', toolCallId: 'c9' },
        ]),
      ) as ModelMessage[];
    const first = estimator.countMessages(stored(), 'o200k_base');
    expect(first).toBe(stored().reduce((sum, m) => sum + rawMessage(m), 0) + 3);

    const spy = spyEncodes();
    expect(estimator.countMessages(stored(), 'o200k_base')).toBe(first);
    expect(spy).not.toHaveBeenCalled();
  });

  it('countMessagesAsync: many ordinary messages adding up past workerThreshold are counted in the workers, not inline', async () => {
    // 40 messages of 2,000 characters each: every one under the threshold, 80,000 together.
    const list: ModelMessage[] = Array.from({ length: 40 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: text(2_000, 100 + i),
    }));
    const expected = list.reduce((sum, m) => sum + rawMessage(m), 0) + 3;
    const spy = spyEncodes();

    await expect(estimator.countMessagesAsync(list, 'o200k_base')).resolves.toBe(expected);

    const longOnMainThread = spy.mock.calls.filter(([piece]) => piece.length > 100);
    expect(longOnMainThread).toEqual([]);
    spy.mockRestore();
    const again = spyEncodes();
    expect(estimator.countMessages(list, 'o200k_base')).toBe(expected);
    expect(again).not.toHaveBeenCalled();
  });

  it('countMessagesAsync: when every count is known it adds them up without encoding', async () => {
    const list: ModelMessage[] = [
      { role: 'user', content: 'a', metadata: { tokenCount: { o200k_base: 11 } } },
      { role: 'assistant', content: 'b', metadata: { tokenCount: { o200k_base: 22 } } },
    ];
    const spy = spyEncodes();

    await expect(estimator.countMessagesAsync(list, 'o200k_base')).resolves.toBe(11 + 22 + 3);
    expect(spy).not.toHaveBeenCalled();
  });

  it('counts a 100k-character text in a worker with the same result as inline', async () => {
    const big = text(100_000, 5);
    const inline = estimator.countText(big, 'o200k_base');
    expect(inline).toBe(raw(big));
    const spy = spyEncodes();
    await expect(estimator.countTextAsync(big, 'o200k_base')).resolves.toBe(inline);
    const [a, b] = await Promise.all([
      estimator.countTextAsync(big, 'cl100k_base'),
      estimator.countTextAsync(big.slice(1), 'o200k_base'),
    ]);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
    expect(a).toBe(estimator.countText(big, 'cl100k_base'));
    expect(b).toBe(raw(big.slice(1)));
    await expect(estimator.countTextAsync('small text', 'o200k_base')).resolves.toBe(
      raw('small text'),
    );
  });

  it('countMessagesAsync counts large messages in workers and fills the cache', async () => {
    const list: ModelMessage[] = [
      { role: 'user', content: 'short question' },
      { role: 'tool', content: text(60_000, 9), toolCallId: 'c1' },
      { role: 'assistant', content: 'ok', reasoningContent: text(25_000, 4) },
    ];
    const expected = list.reduce((sum, m) => sum + rawMessage(m), 0) + 3;
    await expect(estimator.countMessagesAsync(list, 'o200k_base')).resolves.toBe(expected);
    const spy = spyEncodes();
    expect(estimator.countMessages(list, 'o200k_base')).toBe(expected);
    expect(spy).not.toHaveBeenCalled();
  });

  it('stampCounts: writes each count into the message it was given, other encodings kept, with no promise when nothing needs the workers', () => {
    const list: ModelMessage[] = [
      { role: 'user', content: 'a fresh question', metadata: { historyId: 'h1' } },
      { role: 'assistant', content: 'known', metadata: { tokenCount: { cl100k_base: 7 } } },
      { role: 'system', content: 'already counted', metadata: { tokenCount: { o200k_base: 5 } } },
    ];

    const pending = estimator.stampCounts(list, 'o200k_base');

    expect(pending).toBeUndefined();
    expect(list[0].metadata).toEqual({
      historyId: 'h1',
      tokenCount: { o200k_base: rawMessage(list[0]) },
    });
    expect(list[1].metadata?.tokenCount).toEqual({
      cl100k_base: 7,
      o200k_base: rawMessage(list[1]),
    });
    expect(list[2].metadata?.tokenCount).toEqual({ o200k_base: 5 });
  });

  it('stampCounts: history adding up past workerThreshold is counted in the workers, then read from the messages', async () => {
    const list: ModelMessage[] = Array.from({ length: 30 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: text(2_000, 300 + i),
    }));
    const spy = spyEncodes();

    const pending = estimator.stampCounts(list, 'o200k_base');

    expect(pending).toBeInstanceOf(Promise);
    await pending;
    expect(spy.mock.calls.filter(([piece]) => piece.length > 100)).toEqual([]);
    expect(list.map((m) => (m.metadata?.tokenCount as Record<string, number>).o200k_base)).toEqual(
      list.map(rawMessage),
    );
    expect(estimator.countMessages(list, 'o200k_base')).toBe(
      list.reduce((sum, m) => sum + rawMessage(m), 0) + 3,
    );
    spy.mockRestore();
  });

  it('precount: the list total at once when every count is known, a promise of it while workers count', async () => {
    const known: ModelMessage[] = [
      { role: 'user', content: 'a', metadata: { tokenCount: { o200k_base: 11 } } },
      { role: 'assistant', content: 'b', metadata: { tokenCount: { o200k_base: 22 } } },
    ];
    const big: ModelMessage[] = [{ role: 'tool', content: text(40_000, 77), toolCallId: 'c' }];

    expect(estimator.precount(known, 'o200k_base')).toBe(11 + 22 + 3);
    const pending = estimator.precount(big, 'o200k_base');
    expect(pending).toBeInstanceOf(Promise);
    await expect(pending).resolves.toBe(rawMessage(big[0]) + 3);
  });

  it('precount tells each message whose count it knew at once, in order; one it encodes, not', () => {
    const fresh = `a text nobody counted yet ${Math.random()}`;
    const list: ModelMessage[] = [
      { role: 'user', content: 'a', metadata: { tokenCount: { o200k_base: 11 } } },
      { role: 'user', content: fresh },
      { role: 'assistant', content: 'b', metadata: { tokenCount: { o200k_base: 22 } } },
    ];
    const told: [string, number][] = [];
    const each = (m: ModelMessage, count: number) => told.push([m.content, count]);

    expect(estimator.precount(list, 'o200k_base', each)).toBe(11 + rawMessage(list[1]) + 22 + 3);
    expect(told).toEqual([
      ['a', 11],
      ['b', 22],
    ]);
    // Counted once, it is known at once the next time.
    told.length = 0;
    expect(estimator.precount(list, 'o200k_base', each)).toBe(11 + rawMessage(list[1]) + 22 + 3);
    expect(told.map(([content]) => content)).toEqual(['a', fresh, 'b']);
  });
});

describe('TokenEstimator lifecycle', () => {
  it('dispose stops the workers, counting afterwards throws, and it is idempotent', async () => {
    const estimator = new TokenEstimator({ workerThreshold: 10 });
    await expect(estimator.countTextAsync('a longer text than ten', 'o200k_base')).resolves.toBe(
      raw('a longer text than ten'),
    );
    await estimator.dispose();
    await estimator.dispose();
    expect(estimator.disposed).toBe(true);
    expect(() => estimator.countText('x', 'o200k_base')).toThrow(/disposed/);
    await expect(estimator.countTextAsync('a longer text than ten', 'o200k_base')).rejects.toThrow(
      /disposed/,
    );
  });

  it('is provided by Nest (options optional) and disposed on application shutdown', async () => {
    const moduleRef = await Test.createTestingModule({
      providers: [
        TokenEstimator,
        UsageTracker,
        { provide: TOKEN_ESTIMATOR_OPTIONS, useValue: { workerThreshold: 1234 } },
      ],
    }).compile();
    const estimator = moduleRef.get(TokenEstimator);
    expect(estimator.workerThreshold).toBe(1234);
    expect(moduleRef.get(UsageTracker)).toBeInstanceOf(UsageTracker);
    await moduleRef.close();
    expect(estimator.disposed).toBe(true);

    const bare = await Test.createTestingModule({ providers: [TokenEstimator] }).compile();
    expect(bare.get(TokenEstimator).workerThreshold).toBe(20_000);
    await bare.close();
  });
});
