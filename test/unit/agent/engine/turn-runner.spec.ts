import {
  ControlKinds,
  WellKnownMetadataKeys as K,
  type Message,
  type NewMessage,
  type TurnAfterContext,
  type TurnOutcome,
} from '../../../../src/contracts';
import { BytePairEncodingCore } from 'gpt-tokenizer/cjs/BytePairEncodingCore';
import type { Turn } from '../../../../src/agent/engine/turn';
import { TurnEndLog } from '../../../../src/agent/engine/turn-end-log';
import { TurnRunner } from '../../../../src/agent/engine/turn-runner';
import { TurnScheduler } from '../../../../src/agent/engine/turn-scheduler';
import { useEngineSpec, type TurnStateOptions } from '../../../support/engine-spec';
import {
  answers,
  echoAppend,
  HeldAnswer,
  newIncoming,
  newToolCall,
  newTurn,
  ScriptedModel,
  SESSION_ID,
  useMemoryLog,
} from '../../../support/turn-fixtures';

const alice = { platform: 'im', userId: 'alice' };
const meta = (m: Message, key: string) => m.metadata[key];

/** What the runner returns for a turn that ended without a reply. */
const unanswered = (turn: Turn, outcome: TurnOutcome, error?: string) => ({
  turnId: turn.id,
  outcome,
  reply: undefined,
  error,
});

/** The notice (`[error]` or `[system]`) a turn sends its session instead of a reply. */
const noticeOf = (turn: Turn, content: string) => ({
  sessionId: SESSION_ID,
  turnId: turn.id,
  content,
  source: 'system',
  platform: 'web',
});

/** An ISO-8601 time as `Date.toISOString` writes it. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('TurnRunner', () => {
  const spec = useEngineSpec();
  const logger = spec.logs;

  interface Setup extends TurnStateOptions {
    /** Messages already in the session's history. */
    history?: Omit<NewMessage, 'sessionId'>[];
  }

  async function setup(options: Setup = {}) {
    const { deps, mocks, provider } = spec.turnDeps(options);
    const log = useMemoryLog(mocks);
    if (options.history) {
      await log.append(options.history.map((m) => ({ sessionId: SESSION_ID, ...m })));
    }
    mocks.sessions.get.mockResolvedValue(
      options.settings ? { sessionId: SESSION_ID, ...options.settings } : undefined,
    );
    mocks.sessions.update.mockImplementation(async (sessionId, patch) => ({ sessionId, ...patch }));
    mocks.lane.takePending.mockReturnValue([]);
    mocks.lane.closeInsertions.mockReturnValue(undefined);
    const turn = newTurn(options.inputs);
    const turnAfter = jest.fn<void, [TurnAfterContext]>();
    deps.hooks.use('agent:turn:after', async (ctx, next) => {
      turnAfter({ ...ctx });
      await next();
    });
    const sut = new TurnRunner(deps);
    return {
      sut,
      run: () => sut.run(turn, mocks.lane),
      deps,
      mocks,
      provider,
      turn,
      turnAfter,
      /** What the session's history holds now. */
      stored: () => log.history(SESSION_ID),
      streamEnds: () => mocks.events.of('outbound:stream').filter((e) => e.done),
    };
  }

  describe('replied', () => {
    it('U2: a long input, tool result and reply are counted in the worker threads, never encoded on the event loop', async () => {
      const long = (word: string) => `${word} `.repeat(5000).trim();
      const { run, deps, provider, stored } = await setup({
        inputs: [{ content: long('question') }],
      });
      deps.tools.register({
        name: 'dump',
        description: 'Returns a long text.',
        parameters: { type: 'object' },
        handler: () => long('result'),
      });
      provider.script(
        answers.tools([newToolCall('dump')], '', { promptTokens: 10, completionTokens: 2 }),
        answers.text(long('answer'), { promptTokens: 20, completionTokens: 5000 }),
      );
      const encoded = jest.spyOn(BytePairEncodingCore.prototype, 'countNative');

      const result = await run();
      const longOnLoop = encoded.mock.calls.filter(([text]) => text.length > 1000);
      encoded.mockRestore();

      expect(result?.outcome).toBe('replied');
      expect(longOnLoop).toEqual([]);
      const encoding = deps.estimator.encodingFor('scripted-model');
      const history = await stored();
      const counted = (role: 'user' | 'tool' | 'assistant', content: string) => ({
        [encoding]: deps.estimator.countMessage({ role, content }, encoding),
      });
      expect(history.map((m) => [m.role, m.metadata[K.TokenCount]])).toEqual([
        ['user', counted('user', long('question'))],
        ['assistant', expect.any(Object)],
        ['tool', counted('tool', long('result'))],
        ['assistant', counted('assistant', long('answer'))],
      ]);
    });

    it('H4, P4: the reply is persisted with its turn record, sent once, and the stream ends once', async () => {
      const { run, provider, mocks, turn, stored, streamEnds, turnAfter } = await setup();
      provider.script(answers.text('Hi!', { promptTokens: 42, completionTokens: 3 }));

      const result = await run();

      expect(result).toEqual({
        turnId: turn.id,
        outcome: 'replied',
        reply: 'Hi!',
        error: undefined,
      });
      const [input, reply] = await stored();
      expect(await stored()).toHaveLength(2);
      expect(input).toMatchObject({ role: 'user', content: 'Hello there' });
      expect(reply).toMatchObject({ role: 'assistant', content: 'Hi!' });
      expect(meta(reply, K.TurnRecord)).toEqual({ outcome: 'replied' });
      expect(meta(reply, K.Tokens)).toEqual({ prompt: 42, completion: 3 });
      expect(mocks.events.of('outbound:message')).toEqual([
        expect.objectContaining({ turnId: turn.id, content: 'Hi!', source: 'agent' }),
      ]);
      expect(streamEnds()).toEqual([
        { sessionId: SESSION_ID, turnId: turn.id, seq: 3, done: true },
      ]);
      expect(turnAfter).toHaveBeenCalledTimes(1);
      expect(turnAfter).toHaveBeenCalledWith({
        inputs: turn.inputs,
        reply: 'Hi!',
        outcome: 'replied',
        sessionId: SESSION_ID,
        turnId: turn.id,
      });
    });

    it('events: agent:turn:start, the stream, token:usage, the stream end, the reply, agent:turn:end', async () => {
      const { run, provider, mocks, turn } = await setup({
        inputs: [{ content: 'ping', source: 'webhook' }],
      });
      provider.script(answers.text('pong'));

      await run();

      expect(mocks.events.names()).toEqual([
        'agent:turn:start',
        'outbound:stream',
        'token:usage',
        'outbound:stream',
        'outbound:message',
        'agent:turn:end',
      ]);
      expect(mocks.events.of('agent:turn:start')).toEqual([
        {
          sessionId: SESSION_ID,
          turnId: turn.id,
          source: 'webhook',
          inputs: [turn.inputs[0].message],
          seq: 1,
        },
      ]);
      expect(mocks.events.of('agent:turn:end')).toEqual([
        { sessionId: SESSION_ID, turnId: turn.id, outcome: 'replied', reply: 'pong', seq: 4 },
      ]);
    });

    it("seq: the turn's stream (turn start, chunks, tool calls, stream end, turn end) is numbered 1, 2, 3, ... in emission order", async () => {
      const { run, deps, provider, mocks } = await setup();
      deps.tools.register({
        name: 'clock',
        description: 'Tells the time',
        parameters: { type: 'object' },
        handler: () => '12:00',
      });
      provider.script(
        answers.tools([newToolCall('clock'), newToolCall('clock')], 'Let me look'),
        answers.text('Noon.'),
      );

      await run();

      const stream = new Set([
        'agent:turn:start',
        'outbound:stream',
        'tool:execute',
        'agent:turn:end',
      ]);
      const numbered = mocks.events.emitted.filter((e) => stream.has(e.name));
      expect(numbered.map((e) => e.name)).toEqual([
        'agent:turn:start',
        'outbound:stream',
        'tool:execute',
        'tool:execute',
        'tool:execute',
        'tool:execute',
        'outbound:stream',
        'outbound:stream',
        'agent:turn:end',
      ]);
      expect(numbered.map((e) => (e.payload as { seq?: number }).seq)).toEqual([
        1, 2, 3, 4, 5, 6, 7, 8, 9,
      ]);
    });

    it('I2: the join window is closed once the final answer is in', async () => {
      const { run, provider, mocks } = await setup();
      provider.script(answers.text('done'));

      await run();

      expect(mocks.lane.takePending).toHaveBeenCalledTimes(1);
      expect(mocks.lane.closeInsertions).toHaveBeenCalledTimes(1);
    });

    it('T1: one turn id on turn:before, the archive, chunks, tool contexts, tool results, usage, the reply and turn:after', async () => {
      const { run, deps, provider, mocks, turn, stored, turnAfter } = await setup();
      const ids = new Set<string>();
      deps.hooks.use('agent:turn:before', async (ctx, next) => {
        ids.add(ctx.turnId);
        await next();
      });
      deps.tools.register({
        name: 'clock',
        description: 'Tells the time',
        parameters: { type: 'object' },
        handler: (_args, ctx) => {
          ids.add(ctx.turnId);
          return '12:00';
        },
      });
      provider.script(answers.tools([newToolCall('clock')], 'Let me look'), answers.text('Noon.'));

      await run();

      for (const message of await stored()) ids.add(meta(message, K.TurnId) as string);
      for (const { payload } of mocks.events.emitted)
        ids.add((payload as { turnId: string }).turnId);
      ids.add(turnAfter.mock.calls[0][0].turnId);
      expect([...ids]).toEqual([turn.id]);
    });

    it('turn-end log line: one line for the turn (context Turn) with its model calls, tool calls, tokens and usage; no by, reason or trace id', async () => {
      const { run, deps, provider, turn } = await setup();
      deps.tools.register({
        name: 'clock',
        description: 'Tells the time',
        parameters: { type: 'object' },
        handler: () => '12:00',
      });
      provider.script(
        answers.tools([newToolCall('clock'), newToolCall('clock')], '', { promptTokens: 40 }),
        answers.text('Noon.', { promptTokens: 50, completionTokens: 2 }),
      );

      await run();

      expect(logger.log).toHaveBeenCalledTimes(1);
      const [line] = logger.log.mock.calls[0] as [TurnEndLog];
      expect(line).toBeInstanceOf(TurnEndLog);
      expect(line.toJSON()).toEqual({
        sessionId: SESSION_ID,
        turnId: turn.id,
        outcome: 'replied',
        durationMs: expect.any(Number),
        modelCalls: 2,
        toolCalls: 2,
        tokens: { prompt: 50, completion: 2 },
        used: 50,
        usageRatio: expect.any(Number),
      });
      expect(String(line)).toMatch(
        new RegExp(`^turn ${turn.id} session "${SESSION_ID}" ended replied in \\d+ ms: `),
      );
    });
  });

  describe('agent:turn:before', () => {
    it('P3, H1: its default action archives the opening inputs in order, with turn id and entry opened', async () => {
      const { run, deps, provider, mocks, turn, stored } = await setup({
        inputs: [{ content: 'first' }, { content: 'second' }],
      });
      const seenInside: { appends: number; archived: boolean }[] = [];
      deps.hooks.use('agent:turn:before', async (ctx, next) => {
        seenInside.push({
          appends: mocks.archive.append.mock.calls.length,
          archived: ctx.inputs.some((i) => i.archived),
        });
        await next();
      });
      provider.script(answers.text('both seen'));

      await run();

      expect(seenInside).toEqual([{ appends: 0, archived: false }]);
      const history = await stored();
      expect(
        history.slice(0, 2).map((m) => [m.content, meta(m, K.TurnId), meta(m, K.TurnEntry)]),
      ).toEqual([
        ['first', turn.id, 'opened'],
        ['second', turn.id, 'opened'],
      ]);
      expect(turn.inputs.map((i) => i.archived?.id)).toEqual([history[0].id, history[1].id]);
    });

    it('H, I9: a middleware that does not call next blocks the turn: nothing archived, no model call, no agent:turn:after, one stream end', async () => {
      const { run, deps, provider, mocks, turn, turnAfter } = await setup();
      deps.hooks.use('agent:turn:before', () => undefined);

      const result = await run();

      expect(result).toBeUndefined();
      expect(mocks.archive.append).not.toHaveBeenCalled();
      expect(mocks.sessions.get).not.toHaveBeenCalled();
      expect(mocks.sessions.update).not.toHaveBeenCalled();
      expect(provider.requests).toHaveLength(0);
      expect(turnAfter).not.toHaveBeenCalled();
      expect(mocks.events.emitted).toEqual([
        {
          name: 'outbound:stream',
          payload: { sessionId: SESSION_ID, turnId: turn.id, seq: 1, done: true },
        },
      ]);
    });

    it('S1, H4: a middleware throwing before next ends the turn with error; inputs are not archived', async () => {
      const { run, deps, provider, mocks, turn, stored, streamEnds, turnAfter } = await setup();
      deps.hooks.use('agent:turn:before', () => {
        throw new Error('policy service down');
      });
      const notice = '[error] The turn failed: policy service down.';

      const result = await run();

      expect(result).toEqual(unanswered(turn, 'error', notice));
      expect(provider.requests).toHaveLength(0);
      expect(mocks.events.of('outbound:message')).toEqual([noticeOf(turn, notice)]);
      const history = await stored();
      expect(history).toEqual([
        expect.objectContaining({
          kind: ControlKinds.EventMarker,
          metadata: { [K.TurnId]: turn.id, [K.TurnRecord]: { outcome: 'error', error: notice } },
        }),
      ]);
      expect(turnAfter).toHaveBeenCalledTimes(1);
      expect(turnAfter).toHaveBeenCalledWith(
        expect.objectContaining({ outcome: 'error', error: notice }),
      );
      expect(streamEnds()).toHaveLength(1);
    });

    it('a middleware throwing after next leaves the ended turn as it was, with a warning', async () => {
      const { run, deps, provider, turnAfter } = await setup();
      deps.hooks.use('agent:turn:before', async (_ctx, next) => {
        await next();
        throw new Error('late failure');
      });
      provider.script(answers.text('fine'));

      const result = await run();

      expect(result).toMatchObject({ outcome: 'replied', reply: 'fine' });
      expect(turnAfter).toHaveBeenCalledTimes(1);
      expect(logger.warn).toHaveBeenCalledWith(expect.stringContaining('late failure'));
    });
  });

  describe('agent:turn:after', () => {
    it('I13: a throwing middleware is logged once and does not re-enter the error path', async () => {
      const { run, deps, provider, mocks, turnAfter } = await setup();
      deps.hooks.use('agent:turn:after', () => {
        throw new Error('audit sink down');
      });
      provider.script(answers.text('fine'));

      const result = await run();

      expect(result).toMatchObject({ outcome: 'replied' });
      expect(turnAfter).toHaveBeenCalledTimes(1);
      const logged = logger.error.mock.calls.filter(([line]) =>
        String(line).includes('audit sink down'),
      );
      expect(logged).toHaveLength(1);
      expect(mocks.events.of('outbound:message').map((m) => m.source)).toEqual(['agent']);
      expect(mocks.events.of('agent:turn:end')).toHaveLength(1);
    });
  });

  describe("the session's last turn (H4)", () => {
    it('H4: the session keeps the record of its last turn', async () => {
      const { run, provider, mocks, turn } = await setup({ inputs: [{ source: 'webhook' }] });
      provider.script(answers.text('done'));

      await run();

      expect(mocks.sessions.update).toHaveBeenCalledTimes(1);
      expect(mocks.sessions.update).toHaveBeenCalledWith(SESSION_ID, {
        lastTurn: {
          turnId: turn.id,
          outcome: 'replied',
          source: 'webhook',
          endedAt: expect.stringMatching(ISO_TIME),
        },
      });
    });

    it('H4: an error turn leaves its one-sentence reason as the last turn', async () => {
      const { run, provider, mocks, turn } = await setup();
      provider.script(answers.error(new Error('upstream answered 502')));

      await run();

      expect(mocks.sessions.update).toHaveBeenCalledWith(SESSION_ID, {
        lastTurn: {
          turnId: turn.id,
          outcome: 'error',
          error: '[error] The turn failed: upstream answered 502.',
          endedAt: expect.stringMatching(ISO_TIME),
        },
      });
    });

    it('a store that refuses the write only costs a warning; the turn still ends', async () => {
      const { run, provider, mocks, turnAfter } = await setup();
      mocks.sessions.update.mockRejectedValue(new Error('Session "session-1" has no settings'));
      provider.script(answers.text('done'));

      const result = await run();

      expect(result?.outcome).toBe('replied');
      expect(turnAfter).toHaveBeenCalledTimes(1);
      expect(logger.warn).toHaveBeenCalledWith(expect.stringContaining('has no settings'));
    });
  });

  describe('model resolution', () => {
    it('H4: no provider: a [system] notice, outcome error, inputs archived and an event marker; no model call', async () => {
      const { run, mocks, turn, stored, turnAfter } = await setup({ provider: null });
      const notice =
        '[system] No model provider is configured: set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL) or bind an LlmProvider.';

      const result = await run();

      expect(result).toEqual(unanswered(turn, 'error', notice));
      expect(mocks.events.of('outbound:message')).toEqual([noticeOf(turn, notice)]);
      const [input, marker, ...rest] = await stored();
      expect(rest).toEqual([]);
      expect(input).toMatchObject({
        role: 'user',
        metadata: { [K.TurnId]: turn.id, [K.TurnEntry]: 'opened' },
      });
      expect(input.metadata).not.toHaveProperty(K.TokenCount);
      expect(marker).toMatchObject({
        kind: ControlKinds.EventMarker,
        metadata: { [K.TurnRecord]: { outcome: 'error', error: notice } },
      });
      expect(mocks.events.of('token:usage')).toEqual([]);
      expect(turnAfter).toHaveBeenCalledWith(
        expect.objectContaining({ outcome: 'error', error: notice }),
      );
    });

    it('H4: a session model no provider serves is named in the [system] notice', async () => {
      const { run } = await setup({ settings: { model: { model: 'gpt-nowhere' } } });

      const result = await run();

      expect(result?.error).toBe(
        '[system] Model "gpt-nowhere" is not served by any configured provider (available: scripted/scripted-model).',
      );
    });
  });

  describe('other outcomes', () => {
    it('H4, P4: an empty answer is silent: no reply persisted or sent, an event marker records it', async () => {
      const { run, provider, mocks, turn, stored, streamEnds } = await setup({
        inputs: [{ source: 'scheduler' }],
      });
      provider.script(answers.text('   '));

      const result = await run();

      expect(result).toEqual(unanswered(turn, 'silent'));
      expect(mocks.events.of('outbound:message')).toEqual([]);
      const [, marker] = await stored();
      expect(marker).toMatchObject({
        role: 'system',
        kind: ControlKinds.EventMarker,
        content: '',
        metadata: {
          [K.TurnId]: turn.id,
          [K.TurnRecord]: { outcome: 'silent', source: 'scheduler' },
        },
      });
      expect(streamEnds()).toHaveLength(1);
    });

    it('H4, S3, P5: a stop mid-stream: aborted, stop marker then event marker naming who stopped it, no notice', async () => {
      const { run, provider, mocks, turn, stored, streamEnds, turnAfter } = await setup();
      const held = new HeldAnswer([{ contentDelta: 'Once upon' }]);
      provider.script(held.step());

      const running = run();
      await held.reached.promise;
      turn.abort({ by: alice, reason: 'took too long' });
      held.answer({ contentDelta: ' a time' });
      const result = await running;

      expect(result).toEqual(unanswered(turn, 'aborted'));
      expect(mocks.events.of('outbound:message')).toEqual([]);
      const [, stop, marker] = await stored();
      expect(stop).toMatchObject({
        kind: ControlKinds.TurnStopped,
        metadata: { [K.StoppedBy]: alice },
      });
      expect(marker).toMatchObject({
        kind: ControlKinds.EventMarker,
        metadata: { [K.TurnRecord]: { outcome: 'aborted', by: alice } },
      });
      expect(turnAfter).toHaveBeenCalledWith(
        expect.objectContaining({ outcome: 'aborted', reply: '' }),
      );
      expect(streamEnds()).toHaveLength(1);
      expect(logger.log).toHaveBeenCalledTimes(1);
      const [line] = logger.log.mock.calls[0] as [TurnEndLog];
      expect(line.toJSON()).toMatchObject({
        outcome: 'aborted',
        modelCalls: 0,
        by: alice,
        reason: 'took too long',
      });
      expect(String(line)).toContain('ended aborted in ');
      expect(String(line)).toContain('; stopped by "im:alice" (reason: "took too long")');
    });

    it('S3, P5: a turn stopped inside agent:turn:before still archives its inputs and leaves a stop marker', async () => {
      const { run, deps, provider, turn, stored } = await setup();
      deps.hooks.use('agent:turn:before', async (_ctx, next) => {
        turn.abort({});
        await next();
      });

      const result = await run();

      expect(result?.outcome).toBe('aborted');
      expect(provider.requests).toHaveLength(0);
      expect((await stored()).map((m) => m.kind ?? m.role)).toEqual([
        'user',
        ControlKinds.TurnStopped,
        ControlKinds.EventMarker,
      ]);
    });

    it('H4: a provider error ends the turn with error and a one-sentence [error] notice with the turn id', async () => {
      const { run, provider, mocks, turn, stored } = await setup();
      provider.script(answers.error(new Error('upstream answered 502')));
      const notice = '[error] The turn failed: upstream answered 502.';

      const result = await run();

      expect(result).toEqual(unanswered(turn, 'error', notice));
      expect(mocks.events.of('outbound:message')).toEqual([noticeOf(turn, notice)]);
      expect((await stored()).at(-1)?.metadata[K.TurnRecord]).toEqual({
        outcome: 'error',
        error: notice,
      });
      expect(mocks.events.of('agent:turn:end')).toEqual([
        { sessionId: SESSION_ID, turnId: turn.id, outcome: 'error', error: notice, seq: 3 },
      ]);
    });

    it('markers that cannot be persisted are logged; the turn still ends', async () => {
      const { run, provider, mocks, turnAfter, streamEnds } = await setup();
      provider.script(answers.text(''));
      mocks.archive.append
        .mockImplementationOnce(echoAppend)
        .mockRejectedValueOnce(new Error('database locked'));

      const result = await run();

      expect(result?.outcome).toBe('silent');
      expect(logger.error).toHaveBeenCalledWith(expect.stringContaining('database locked'));
      expect(turnAfter).toHaveBeenCalledTimes(1);
      expect(streamEnds()).toHaveLength(1);
    });

    it.each([
      ['replied', answers.text('yes')],
      ['silent', answers.text('')],
      ['error', answers.error(new Error('boom'))],
    ])(
      'I9: exactly one stream-end marker with the turn id when the turn ends %s',
      async (outcome, step) => {
        const { run, provider, turn, streamEnds } = await setup();
        provider.script(step);

        const result = await run();

        expect(result?.outcome).toBe(outcome);
        expect(streamEnds()).toEqual([
          { sessionId: SESSION_ID, turnId: turn.id, seq: expect.any(Number), done: true },
        ]);
      },
    );
  });

  describe('settlements (through the scheduler)', () => {
    /** Runs one input through a real scheduler and this runner; resolves with its settlement. */
    async function settle(configure: (t: Awaited<ReturnType<typeof setup>>) => void) {
      const t = await setup();
      configure(t);
      const scheduler = new TurnScheduler(t.deps, t.sut, { isHeld: () => false });
      return { scheduler, settlement: scheduler.enter(newIncoming()) };
    }

    it.each([
      {
        outcome: 'replied',
        step: answers.text('yes'),
        expected: { outcome: 'replied', reply: 'yes' },
      },
      { outcome: 'silent', step: answers.text(' '), expected: { outcome: 'silent' } },
      {
        outcome: 'error',
        step: answers.error(new Error('boom')),
        expected: { outcome: 'error', error: '[error] The turn failed: boom.' },
      },
    ])(
      'H4, S1: a turn that ends $outcome settles its inputs with that outcome',
      async ({ step, expected }) => {
        const { settlement } = await settle((t) => t.provider.script(step));

        await expect(settlement).resolves.toEqual({
          settled: 'turn',
          turnId: expect.any(String),
          ...expected,
        });
      },
    );

    it('S1, S3: an aborted turn settles its inputs as aborted', async () => {
      const held = new HeldAnswer();
      const { scheduler, settlement } = await settle((t) => t.provider.script(held.step()));
      await held.reached.promise;

      expect(scheduler.abort(SESSION_ID, { by: alice })).toBe(true);
      held.answer();

      await expect(settlement).resolves.toEqual({
        settled: 'turn',
        turnId: expect.any(String),
        outcome: 'aborted',
      });
    });

    it('S1: a blocked turn settles its inputs as dropped (blocked)', async () => {
      const { settlement } = await settle((t) =>
        t.deps.hooks.use('agent:turn:before', () => undefined),
      );

      await expect(settlement).resolves.toEqual({ settled: 'dropped', reason: 'blocked' });
    });
  });

  describe('the first prompt', () => {
    const history: Omit<NewMessage, 'sessionId'>[] = [
      { role: 'user', content: 'old question', metadata: {} },
      { role: 'assistant', content: 'old answer', metadata: {} },
      { role: 'system', kind: ControlKinds.EventMarker, content: '', metadata: {} },
      { role: 'user', content: 'newer question', metadata: {} },
    ];

    it("system prompt, history within the limit without this turn's inputs, then the inputs", async () => {
      const { run, provider } = await setup({ history, settings: { historyLimit: 2 } });
      provider.script(answers.text('ok'));

      await run();

      expect(provider.requests[0].messages.map((m) => [m.role, m.content])).toEqual([
        ['system', 'You are the test assistant.'],
        ['assistant', 'old answer'],
        ['user', 'newer question'],
        ['user', 'Hello there'],
      ]);
    });

    it("U5: historyMessages of the first call counts history and this turn's inputs, not control kinds", async () => {
      const { run, provider, mocks } = await setup({ history });
      provider.script(answers.text('ok'));

      await run();

      expect(mocks.events.of('token:usage').map((e) => e.historyMessages)).toEqual([3 + 1]);
    });

    it.each([
      ['a vision model sees the images of the inputs', true, ['data:image/png;base64,AA']],
      ['a model without vision gets the text only', false, undefined],
    ])('H2: %s', async (_case, vision, images) => {
      const { run, provider } = await setup({
        provider: new ScriptedModel({ capabilities: { vision } }),
        inputs: [{ attachments: [{ kind: 'image', data: 'data:image/png;base64,AA' }] }],
      });
      provider.script(answers.text('a cat'));

      await run();

      expect(provider.requests[0].messages.at(-1)?.images).toEqual(images);
    });

    it('I4: in rooms inputs name their speaker', async () => {
      const { run, provider } = await setup({
        inputs: [{ sessionKind: 'room', nickname: 'Al', userId: 'u-1', content: 'hi all' }],
      });
      provider.script(answers.text('hello Al'));

      await run();

      expect(provider.requests[0].messages.at(-1)?.content).toBe('[Al(u-1)]: hi all');
    });
  });
});
