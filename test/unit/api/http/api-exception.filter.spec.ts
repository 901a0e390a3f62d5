import type { Logger } from '@nestjs/common';
import { logFailure } from '../../../../src/api/http/api-exception.filter';
import { StoreMethodMissingError, StoreUnavailableError } from '../../../../src/contracts';

/** A logger that keeps what it is given. */
function recordingLogger() {
  const lines: { level: string; text: string }[] = [];
  const logger = {
    warn: (text: string) => lines.push({ level: 'warn', text }),
    error: (text: string) => lines.push({ level: 'error', text }),
  } as unknown as Logger;
  return { logger, lines };
}

describe('logFailure (what a failed request writes to the log)', () => {
  it('an unavailable store: one warning naming the store, its cause escaped', () => {
    const { logger, lines } = recordingLogger();
    const cause = new Error('driver said\nFAKE LOG LINE \u001b[31m');

    logFailure(logger, 'GET "/x"', new StoreUnavailableError('history', 'read', { cause }), 503);

    expect(lines).toEqual([
      {
        level: 'warn',
        text: 'GET "/x": The history store is unavailable (read): "Error: driver said\\nFAKE LOG LINE \\u001b[31m"',
      },
    ]);
  });

  it('a host store without a method a route needs (501): one warning naming it, no stack', () => {
    const { logger, lines } = recordingLogger();

    logFailure(
      logger,
      'GET "/agent/sessions"',
      new StoreMethodMissingError('sessions', 'listByActivity'),
      501,
    );

    expect(lines).toEqual([
      {
        level: 'warn',
        text: 'GET "/agent/sessions": The sessions store does not implement listByActivity(), which this call needs',
      },
    ]);
  });

  it('an unexpected error: its message escaped on the first line, the stack frames after it', () => {
    const { logger, lines } = recordingLogger();
    const error = new Error('user said "a\nb"');

    logFailure(logger, 'Socket handler', error, 500);

    const [first, ...frames] = lines[0].text.split('\n');
    expect(lines[0].level).toBe('error');
    expect(first).toBe('Socket handler: unhandled "Error: user said \\"a\\nb\\""');
    expect(frames.length).toBeGreaterThan(0);
    expect(frames.every((frame) => frame.trimStart().startsWith('at '))).toBe(true);
  });

  it('a client error (4xx): nothing logged', () => {
    const { logger, lines } = recordingLogger();

    logFailure(logger, 'POST "/agent/messages"', new Error('bad'), 400);

    expect(lines).toEqual([]);
  });
});
