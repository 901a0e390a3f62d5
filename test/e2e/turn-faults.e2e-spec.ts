import type { Settlement } from '../../src';
import { AgentHarness } from '../support/agent-harness';
import type { FakeScript } from '../../src/testing';

/** The agent's idle timeout in these rows: short, so silent rows end quickly. */
const IDLE = 300;
/** Every row ends well within this: twice the idle timeout, plus the turn's own work. */
const BOUND = 2 * IDLE + 1500;

type Expected =
  | { outcome: 'error'; notice: RegExp }
  | { outcome: 'replied'; reply: string }
  | { outcome: 'silent' };

const row = (name: string, script: FakeScript, expected: Expected) => ({ name, script, expected });

/**
 * The fault matrix of a turn (hardening), through the whole agent against a real local
 * OpenAI-compatible server: each way a model endpoint misbehaves settles the input within its
 * bound with its notice to the session, and the next turn of the session works.
 */
describe('turn fault matrix (agent, real HTTP model server)', () => {
  let h: AgentHarness;

  beforeAll(async () => {
    h = await AgentHarness.start({ agent: { llmIdleTimeoutMs: IDLE } });
  });

  afterAll(() => h.close());

  afterEach(async () => {
    h.server.discardScripts();
    h.server.enqueue({ text: 'next turn works' });
    const next = await h.agent.handleMessage({ sessionId: 'matrix', content: 'and now?' });
    expect(next).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'next turn works' });
  });

  const silent = /went silent/;
  it.each([
    row(
      'hang before headers',
      { fault: 'hang-before-headers' },
      { outcome: 'error', notice: silent },
    ),
    row(
      'headers then nothing',
      { fault: 'headers-then-silence' },
      { outcome: 'error', notice: silent },
    ),
    row('hang mid-stream', { fault: 'hang-mid-stream' }, { outcome: 'error', notice: silent }),
    row(
      'keep-alive comments only',
      { fault: 'keep-alive-only' },
      { outcome: 'error', notice: silent },
    ),
    row(
      'malformed chunk',
      { raw: ['{not json'] },
      { outcome: 'error', notice: /malformed|not valid/i },
    ),
    row(
      'disconnect mid-stream',
      { fault: 'disconnect-mid-stream' },
      { outcome: 'error', notice: /disconnect|closed|lost/i },
    ),
    row('401', { status: 401 }, { outcome: 'error', notice: /401|key|auth/i }),
    row('403', { status: 403 }, { outcome: 'error', notice: /403|refused|permission|forbidden/i }),
    row('404', { status: 404 }, { outcome: 'error', notice: /404|not found|model/i }),
    row(
      '429 with Retry-After',
      { status: 429, headers: { 'retry-after': '30' } },
      { outcome: 'error', notice: /429|rate|limit/i },
    ),
    row('500', { status: 500 }, { outcome: 'error', notice: /500|server/i }),
    row('503', { status: 503 }, { outcome: 'error', notice: /503|unavailable|overloaded|server/i }),
    row(
      'context-length 400',
      {
        status: 400,
        body: {
          error: {
            message: "This model's maximum context length is 8192 tokens",
            code: 'context_length_exceeded',
          },
        },
      },
      { outcome: 'error', notice: /too long|context/i },
    ),
    row(
      '200 JSON instead of a stream',
      { text: 'from json', ignoreStream: true },
      { outcome: 'replied', reply: 'from json' },
    ),
    row(
      '200 HTML instead of a stream',
      {
        status: 200,
        body: '<!doctype html><title>Sign in</title>',
        headers: { 'content-type': 'text/html' },
      },
      { outcome: 'error', notice: /text\/html.*LLM_BASE_URL/ },
    ),
    row(
      'empty body',
      { status: 200, body: '', headers: { 'content-type': 'text/event-stream' } },
      { outcome: 'silent' },
    ),
    row(
      'no [DONE]',
      { fault: 'no-done', text: 'all of it' },
      { outcome: 'replied', reply: 'all of it' },
    ),
  ])(
    '$name: settles within its bound with its notice, and the next turn works',
    async ({ script, expected }) => {
      h.server.enqueue(script);
      const started = performance.now();

      const settled = await h.agent.handleMessage({ sessionId: 'matrix', content: 'hello' });

      expect(performance.now() - started).toBeLessThan(BOUND);
      expect(settled).toMatchObject({ settled: 'turn', outcome: expected.outcome });
      const end = settled as Extract<Settlement, { settled: 'turn' }>;
      if (expected.outcome === 'error') expect(end.error).toMatch(expected.notice);
      if (expected.outcome === 'replied') expect(end.reply).toBe(expected.reply);
    },
  );

  it('a trickle past the turn deadline is stopped: error saying the turn took too long', async () => {
    const slow = await AgentHarness.start({
      server: h.server,
      agent: { llmIdleTimeoutMs: IDLE, turnTimeoutMs: 800 },
    });
    try {
      slow.server.enqueue({ fault: 'trickle', pingEveryMs: IDLE / 3 });
      const started = performance.now();

      const settled = await slow.agent.handleMessage({ sessionId: 'slow', content: 'hello' });

      expect(performance.now() - started).toBeLessThan(800 + 1500);
      expect(settled).toMatchObject({ settled: 'turn', outcome: 'error' });
      expect((settled as Extract<Settlement, { settled: 'turn' }>).error).toMatch(/took too long/);
    } finally {
      await slow.close();
    }
  });
});
