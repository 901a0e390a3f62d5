import fc from 'fast-check';
import {
  errorForLog,
  escapeForLog,
  MAX_LOGGED_LENGTH,
} from '../../../../src/api/http/escape-for-log';

describe('escapeForLog', () => {
  it.each([
    ['a newline', 'a\nb', '"a\\nb"'],
    ['a carriage return', 'a\rb', '"a\\rb"'],
    ['ESC (terminal colours)', '\u001b[31mred', '"\\u001b[31mred"'],
    ['NUL', 'a\u0000b', '"a\\u0000b"'],
    ['DEL', 'a\u007fb', '"a\\u007fb"'],
    ['C1 NEL', 'a\u0085b', '"a\\u0085b"'],
    ['the line separator', 'a\u2028b', '"a\\u2028b"'],
    ['a quote and a backslash', 'say "\\n"', '"say \\"\\\\n\\""'],
  ])('escapes %s', (_, value, logged) => {
    expect(escapeForLog(value)).toBe(logged);
  });

  it('leaves ordinary text readable, quoted', () => {
    expect(escapeForLog('web:alice ünïcode')).toBe('"web:alice ünïcode"');
  });

  it('the result never holds a control character', () => {
    const all = Array.from({ length: 0xa0 }, (_, i) => String.fromCharCode(i)).join('');

    expect(escapeForLog(all)).not.toMatch(/[^\u0020-\u007e]/);
  });

  it(`cuts values longer than ${MAX_LOGGED_LENGTH} characters, saying how long they were`, () => {
    const logged = escapeForLog('x'.repeat(10_000));

    expect(logged.length).toBeLessThan(MAX_LOGGED_LENGTH + 40);
    expect(logged).toContain('(10000 chars)');
  });

  it('non-strings: their text, escaped', () => {
    expect(escapeForLog(42)).toBe('"42"');
    expect(escapeForLog(Object.create(null))).toBe('"[object Object]"');
  });

  it('the plain-text fast path answers exactly what the escaping answers', () => {
    const reference = (text: string) =>
      JSON.stringify(text).replace(
        /[\u007f-\u009f\u2028\u2029]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
    const short = fc.oneof(
      fc.string({ maxLength: MAX_LOGGED_LENGTH }),
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.stringMatching(/^[ -~]{0,60}$/),
    );
    fc.assert(
      fc.property(short, (text) => escapeForLog(text) === reference(text)),
      {
        numRuns: 2000,
      },
    );
  });

  it('errorForLog: name and message on one line', () => {
    expect(errorForLog(new TypeError('bad\nline'))).toBe('"TypeError: bad\\nline"');
  });
});
