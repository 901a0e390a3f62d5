import { Logger } from '@nestjs/common';
import { get_encoding } from 'tiktoken';
import type { ModelMessage, TokenUsageEvent, ToolDefinition } from '../../../src/contracts';
import { TokenEstimator } from '../../../src/usage/token-estimator';
import { UsageTracker, type UsageEventInput } from '../../../src/usage/usage.tracker';

/** Reference encoder, independent of the code under test. */
const ref = get_encoding('o200k_base');
const raw = (text: string): number => ref.encode(text).length;
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
const sum = (list: ModelMessage[]): number => list.reduce((n, m) => n + rawMessage(m), 0);

const persona: ModelMessage = {
  role: 'system',
  content: 'You are Mira, a concise assistant for the ops team.',
  metadata: { bucket: 'persona', injector: 'Core/persona' },
};
const summary: ModelMessage = {
  role: 'system',
  content: 'Summary: the user is migrating a Postgres cluster to version 16.',
  metadata: { bucket: 'memorySummary', injector: 'MemoryModule/summary' },
};
const recalled: ModelMessage = {
  role: 'system',
  content: 'Recalled: the staging cluster is called pg-stage-2.',
  metadata: { bucket: 'memoryVector', injector: 'MemoryModule/vector' },
};
const skillA: ModelMessage = {
  role: 'system',
  content: 'Skill: sql-review. Use it when the user pastes SQL.',
  metadata: { bucket: 'skills', injector: 'Skills/discovery' },
};
const skillB: ModelMessage = {
  role: 'system',
  content: 'Active skill sql-review: check indexes first.',
  metadata: { bucket: 'skills', injector: 'Skills/activation' },
};
const platformHint: ModelMessage = {
  role: 'system',
  content: 'Platform: Slack; use short paragraphs.',
  metadata: { bucket: 'platform', injector: 'Slack/hint' },
};
const plainSystem: ModelMessage = { role: 'system', content: 'Current time: 2026-11-29 10:00.' };
const profile: ModelMessage = {
  role: 'system',
  content: 'User profile: prefers psql over GUIs.',
  metadata: { bucket: 'systemOther', injector: 'Profiles/user' },
};
const stopMarker: ModelMessage = {
  role: 'system',
  content: 'The previous turn was stopped by alice before it answered.',
  metadata: { kind: 'turn-stopped' },
};
const history: ModelMessage[] = [
  { role: 'user', content: 'How do I check replication lag?' },
  {
    role: 'assistant',
    content: 'Checking the cluster.',
    reasoningContent: 'I should query pg_stat_replication.',
    toolCalls: [
      { id: 'c1', type: 'function', function: { name: 'sql', arguments: '{"q":"select 1"}' } },
    ],
  },
];
const toolResult: ModelMessage = { role: 'tool', content: '{"lag_ms":120}', toolCallId: 'c1' };
const tools: ToolDefinition[] = [
  {
    name: 'sql',
    description: 'Run a read-only SQL query',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
  },
];
const sent = [
  persona,
  summary,
  recalled,
  skillA,
  skillB,
  platformHint,
  plainSystem,
  profile,
  stopMarker,
  ...history,
  toolResult,
];
const toolTokens =
  4 +
  raw(
    JSON.stringify({
      name: tools[0].name,
      description: tools[0].description,
      parameters: tools[0].parameters,
    }),
  );

describe('UsageTracker', () => {
  let estimator: TokenEstimator;
  let tracker: UsageTracker;
  const input = (over: Partial<UsageEventInput> = {}): UsageEventInput => ({
    sessionId: 's1',
    turnId: 't1',
    platform: 'slack',
    messages: sent,
    tools,
    encoding: 'o200k_base',
    contextWindow: 128_000,
    maxTokens: 4096,
    tokenBudget: 123_392,
    trimmed: false,
    historyMessages: 7,
    historyLimit: 50,
    ...over,
  });
  const systemTokens = sum([
    persona,
    summary,
    recalled,
    skillA,
    skillB,
    platformHint,
    plainSystem,
    profile,
  ]);
  const historyTokens = sum([stopMarker, ...history]);
  const toolResultTokens = rawMessage(toolResult);
  const estimate = systemTokens + historyTokens + toolResultTokens + toolTokens;

  beforeAll(() => {
    estimator = new TokenEstimator();
    tracker = new UsageTracker(estimator);
  });
  afterAll(async () => {
    await estimator.dispose();
    ref.free();
  });
  afterEach(() => jest.restoreAllMocks());

  it('U7: breakdown buckets the list as sent, with exact token counts', () => {
    const { breakdown } = tracker.buildEvent(input());
    expect(breakdown).toEqual({
      system: systemTokens,
      persona: rawMessage(persona),
      memorySummary: rawMessage(summary),
      memoryVector: rawMessage(recalled),
      skills: rawMessage(skillA) + rawMessage(skillB),
      platform: rawMessage(platformHint),
      subtask: 0,
      systemOther: rawMessage(plainSystem) + rawMessage(profile),
      history: historyTokens,
      toolResults: toolResultTokens,
      toolDefs: toolTokens,
      reservedForReply: 4096,
    });
  });

  it('U7: parts are display-ordered with injectors keyed by global key', () => {
    expect(tracker.buildEvent(input()).parts).toEqual([
      {
        label: 'Persona',
        tokens: rawMessage(persona),
        injectors: { 'Core/persona': rawMessage(persona) },
      },
      {
        label: 'Skills',
        tokens: rawMessage(skillA) + rawMessage(skillB),
        injectors: {
          'Skills/discovery': rawMessage(skillA),
          'Skills/activation': rawMessage(skillB),
        },
      },
      {
        label: 'Memory summary',
        tokens: rawMessage(summary),
        injectors: { 'MemoryModule/summary': rawMessage(summary) },
      },
      {
        label: 'Memory (retrieved)',
        tokens: rawMessage(recalled),
        injectors: { 'MemoryModule/vector': rawMessage(recalled) },
      },
      {
        label: 'Platform',
        tokens: rawMessage(platformHint),
        injectors: { 'Slack/hint': rawMessage(platformHint) },
      },
      {
        label: 'Other system',
        tokens: rawMessage(plainSystem) + rawMessage(profile),
        injectors: { 'Profiles/user': rawMessage(profile) },
      },
      { label: 'History', tokens: historyTokens },
      { label: 'Tool results', tokens: toolResultTokens },
      { label: 'Tool definitions', tokens: toolTokens },
    ]);
  });

  it('U2: used is the prompt tokens reported by the provider', () => {
    const event = tracker.buildEvent(input({ reportedPromptTokens: 64_000 }));
    expect(event.used).toBe(64_000);
    expect(event.usageRatio).toBe(0.5);
  });

  it('U2: used falls back to the estimate when the provider reports no prompt tokens', () => {
    for (const reported of [undefined, 0, -3, Number.NaN, Number.POSITIVE_INFINITY]) {
      const event = tracker.buildEvent(input({ reportedPromptTokens: reported }));
      expect(event.used).toBe(estimate);
      expect(event.usageRatio).toBeCloseTo(estimate / 128_000, 12);
    }
  });

  it('U4: untrimmedHistory defaults to history + tool results of the sent list, else as given', () => {
    expect(tracker.buildEvent(input()).untrimmedHistory).toBe(historyTokens + toolResultTokens);
    expect(tracker.buildEvent(input({ untrimmedHistory: 90_000 })).untrimmedHistory).toBe(90_000);
  });

  it('U3/U5/U6: trimmed, historyMessages and historyLimit are carried as given', () => {
    const event = tracker.buildEvent(
      input({ trimmed: true, historyMessages: 12, historyLimit: 0 }),
    );
    expect(event).toMatchObject({ trimmed: true, historyMessages: 12, historyLimit: 0 });
    expect(tracker.buildEvent(input({ historyLimit: 30 })).historyLimit).toBe(30);
  });

  it('T2: a snapshot without turnId carries no turnId key', () => {
    const event = tracker.buildEvent(input({ turnId: undefined }));
    expect('turnId' in event).toBe(false);
    expect(event).toMatchObject({
      sessionId: 's1',
      platform: 'slack',
      contextWindow: 128_000,
      tokenBudget: 123_392,
      maxTokens: 4096,
    });
  });

  it('U2: buildEventAsync gives the same event as buildEvent', async () => {
    const fresh = new TokenEstimator({ workerThreshold: 20 });
    const asyncEvent = await new UsageTracker(fresh).buildEventAsync(input());
    await fresh.dispose();
    expect(asyncEvent).toEqual(tracker.buildEvent(input()));
    // Starting worker threads takes seconds on a loaded 2-core machine.
  }, 20_000);

  it('warns when a session climbs to WARN or CRITICAL, naming the top three buckets; OK and INFO write nothing (the turn-end line has every turn)', () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    let turn = 1;
    const at = (ratio: number, turnId = `t${turn++}`): TokenUsageEvent => ({
      ...tracker.buildEvent(input({ sessionId: 'log', turnId })),
      usageRatio: ratio,
    });
    const quiet = [0.1, 0.1, 0.55, 0.6, 0.1].map((ratio) => tracker.noteUsage(at(ratio)));
    expect(quiet).toEqual([false, false, false, false, false]);
    expect(tracker.noteUsage(at(0.72))).toBe(true);
    expect(tracker.noteUsage(at(0.75))).toBe(false);
    expect(tracker.noteUsage(at(0.9))).toBe(true);
    expect(tracker.noteUsage(at(0.95))).toBe(false);
    expect(log).not.toHaveBeenCalled();
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[0][0]).toMatch(
      /^session "log" turn "t6" WARN \d+\/128000 tokens \(72\.0%\); top: history \d+/,
    );
    expect(warn.mock.calls[0][0].split('top: ')[1].split(';')[0].split(', ')).toHaveLength(3);
    expect(warn.mock.calls[1][0]).toMatch(/CRITICAL/);
    tracker.forget('log');
    expect(tracker.noteUsage(at(0.95))).toBe(true);
  });

  it('usage warnings escape what users wrote: a forged line in a session id stays on one line', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const event = tracker.buildEvent(input({ sessionId: 'evil\nINFO forged', turnId: 't' }));

    tracker.noteUsage({ ...event, usageRatio: 0.9 });

    expect(warn.mock.calls[0][0]).toContain('session "evil\\nINFO forged"');
    expect(warn.mock.calls[0][0]).not.toContain('\n');
  });

  it('keeps the last level of the 1,000 most recently active sessions: an active one is not forgotten, an idle one is', () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const base = tracker.buildEvent(input({ sessionId: 'x', turnId: 't' }));
    let turn = 0;
    const event = (sessionId: string, usageRatio = 0.9): TokenUsageEvent => ({
      ...base,
      sessionId,
      turnId: `t${++turn}`,
      usageRatio,
    });
    expect(tracker.noteUsage(event('active'))).toBe(true);
    expect(tracker.noteUsage(event('idle'))).toBe(true);
    // 1,500 other sessions come and go; `active` has a turn every 100 of them.
    for (let i = 0; i < 1500; i++) {
      tracker.noteUsage(event(`other-${i}`, 0.1));
      if (i % 100 === 99 && i < 800) expect(tracker.noteUsage(event('active'))).toBe(false);
    }
    // Still CRITICAL and remembered: no second warning.
    expect(tracker.noteUsage(event('active'))).toBe(false);
    // `idle` was forgotten: its next CRITICAL turn warns again.
    expect(tracker.noteUsage(event('idle'))).toBe(true);
  });
});
