import { inspect } from 'node:util';
import { ConsoleLogger } from '@nestjs/common';
import {
  context,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import {
  activeTraceId,
  TurnEndLog,
  type TurnEndFields,
} from '../../../../src/agent/engine/turn-end-log';

/** The fields of an ordinary replied turn. */
const replied = (more: Partial<TurnEndFields> = {}): TurnEndFields => ({
  sessionId: 'web:alice',
  turnId: 'turn-1',
  outcome: 'replied',
  durationMs: 812,
  modelCalls: 2,
  toolCalls: 1,
  tokens: { prompt: 120, completion: 30 },
  used: 1540,
  usageRatio: 0.012,
  ...more,
});

/** A context manager without async propagation: enough for synchronous `context.with`. */
class StackContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;
  active(): Context {
    return this.current;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const previous = this.current;
    this.current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = previous;
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.current = ROOT_CONTEXT;
    return this;
  }
}

/** What a Nest `ConsoleLogger` with `options` writes for `message` (context `Turn`). */
function printed(message: unknown, options: ConstructorParameters<typeof ConsoleLogger>[1] = {}) {
  const out: string[] = [];
  const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    out.push(String(chunk));
    return true;
  });
  try {
    new ConsoleLogger('Turn', { colors: false, ...options }).log(message);
  } finally {
    write.mockRestore();
  }
  return out.join('');
}

describe('TurnEndLog (the turn-end log line)', () => {
  it('turn-end log line: the text line names the turn, session, outcome, duration, counts, tokens and context usage', () => {
    const line = new TurnEndLog(replied()).toString();

    expect(line).toBe(
      'turn turn-1 session "web:alice" ended replied in 812 ms: 2 model calls, 1 tool call, ' +
        'tokens 120 prompt / 30 completion, context 1540 used (1.2%)',
    );
  });

  it('turn-end log line: toJSON gives the fields; by and reason only when given', () => {
    expect(new TurnEndLog(replied()).toJSON()).toEqual(replied());
    expect(JSON.parse(JSON.stringify(new TurnEndLog(replied())))).not.toHaveProperty('by');
    expect(JSON.parse(JSON.stringify(new TurnEndLog(replied())))).not.toHaveProperty('reason');

    const stopped = new TurnEndLog(
      replied({
        outcome: 'aborted',
        by: { platform: 'admin', userId: 'admin' },
        reason: 'took too long',
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      }),
    );

    expect(JSON.parse(JSON.stringify(stopped))).toMatchObject({
      outcome: 'aborted',
      by: { platform: 'admin', userId: 'admin' },
      reason: 'took too long',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(String(stopped)).toMatch(
      /ended aborted in 812 ms: .*; stopped by "admin:admin" \(reason: "took too long"\); trace 4bf92f3577b34da6a3ce929d0e0e4736$/,
    );
  });

  it('turn-end log line: no model call writes no context usage; counts of one are singular', () => {
    const line = new TurnEndLog(
      replied({ modelCalls: 1, toolCalls: 0, used: undefined, usageRatio: undefined }),
    );

    expect(String(line)).toMatch(
      /: 1 model call, 0 tool calls, tokens 120 prompt \/ 30 completion$/,
    );
  });

  it('S3: what users wrote is escaped in the text line: a forged line in a session id, a reason or a by stays on one line', () => {
    const line = String(
      new TurnEndLog(
        replied({
          sessionId: 'evil\nINFO forged line',
          outcome: 'aborted',
          by: { platform: 'im', userId: 'mallory\r\nERROR x' },
          reason: 'stop\u001b[31m\nERROR forged',
        }),
      ),
    );

    expect([line.includes('\n'), line.includes('\r'), line.includes('\u001b')]).toEqual([
      false,
      false,
      false,
    ]);
    expect(line).toContain('session "evil\\nINFO forged line"');
    expect(line).toContain('stopped by "im:mallory\\r\\nERROR x"');
    expect(line).toContain('(reason: "stop\\u001b[31m\\nERROR forged")');
  });

  it('S3: a reason longer than any logged value is cut in the JSON fields too', () => {
    const reason = 'x'.repeat(1000);

    const fields = new TurnEndLog(replied({ reason })).toJSON();

    expect(fields.reason).toBe(`${'x'.repeat(300)}… (1000 chars)`);
  });

  it("turn-end log line: util.inspect and Nest's text ConsoleLogger print the one human-readable line", () => {
    const log = new TurnEndLog(replied());

    expect(inspect(log)).toBe(log.toString());
    const out = printed(log);
    expect(out.split('\n').filter(Boolean)).toHaveLength(1);
    expect(out).toContain(`[Turn] ${log.toString()}`);
  });

  it("turn-end log line: Nest's ConsoleLogger({ json: true }) writes one JSON object with the fields under message", () => {
    const out = printed(new TurnEndLog(replied({ reason: 'a\nb' })), { json: true });

    const lines = out.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toEqual({
      level: 'log',
      pid: process.pid,
      timestamp: expect.any(Number),
      context: 'Turn',
      message: replied({ reason: 'a\nb' }),
    });
  });

  describe('activeTraceId', () => {
    beforeAll(() => context.setGlobalContextManager(new StackContextManager()));
    afterAll(() => context.disable());

    it('turn-end log line: the trace id of the active span context, only when it is valid', () => {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const valid = trace.setSpanContext(ROOT_CONTEXT, {
        traceId,
        spanId: '00f067aa0ba902b7',
        traceFlags: TraceFlags.SAMPLED,
      });
      const invalid = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: '0'.repeat(32),
        spanId: '0'.repeat(16),
        traceFlags: TraceFlags.NONE,
      });

      expect(activeTraceId()).toBeUndefined();
      expect(context.with(valid, activeTraceId)).toBe(traceId);
      expect(context.with(invalid, activeTraceId)).toBeUndefined();
    });
  });
});
