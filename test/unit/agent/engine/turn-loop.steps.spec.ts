import {
  TurnAbortedError,
  WellKnownMetadataKeys as K,
  type LlmBeforeContext,
  type ModelMessage,
} from '../../../../src/contracts';
import { runSteps } from '../../../../src/agent/engine/turn-loop';
import type { EnginePorts } from '../../../../src/agent/engine/ports';
import type { PendingInput } from '../../../../src/agent/engine/turn';
import { useEngineSpec, type TurnStateOptions } from '../../../support/engine-spec';
import {
  answers,
  echoAppend,
  newEchoTool,
  newInputMessage,
  newPending,
  newSystemMessage,
  newToolCall,
  ScriptedModel,
  SESSION_ID,
} from '../../../support/turn-fixtures';

/** The context of each `agent:llm:before`. */
function recordLlmBefore(deps: Pick<EnginePorts, 'hooks'>): LlmBeforeContext[] {
  const seen: LlmBeforeContext[] = [];
  deps.hooks.use('agent:llm:before', async (ctx, next) => {
    seen.push(ctx);
    await next();
  });
  return seen;
}

/** The messages each `agent:llm:after` sees, with their length at that moment. */
function recordLlmAfter(deps: Pick<EnginePorts, 'hooks'>) {
  const seen: { messages: ModelMessage[]; length: number }[] = [];
  deps.hooks.use('agent:llm:after', async (ctx, next) => {
    seen.push({ messages: ctx.messages, length: ctx.messages.length });
    await next();
  });
  return seen;
}

describe('runSteps (step loop)', () => {
  const spec = useEngineSpec();

  interface Setup extends TurnStateOptions {
    /** What `takePending` returns before each call, in order; nothing once used up. */
    pending?: PendingInput[][];
    historyBase?: number;
    noTools?: boolean;
  }

  function setup(options: Setup = {}) {
    const fixture = spec.turnState({
      ...options,
      inputs: options.inputs ?? [{ content: 'What is up?' }],
    });
    const { deps, mocks, provider, state } = fixture;
    if (!options.noTools) deps.tools.register(newEchoTool());
    state.working = [newSystemMessage(), newInputMessage('What is up?')];
    state.historyBase = options.historyBase ?? 0;
    const pending = [...(options.pending ?? [])];
    /** Number of model calls already made whenever the lane was asked / closed. */
    const takenAt: number[] = [];
    const closedAt: number[] = [];
    mocks.lane.takePending.mockImplementation(() => {
      takenAt.push(provider.requests.length);
      return pending.shift() ?? [];
    });
    mocks.lane.closeInsertions.mockImplementation(() => {
      closedAt.push(provider.requests.length);
    });
    mocks.archive.append.mockImplementation(echoAppend);
    return { ...fixture, sut: () => runSteps(deps, state, mocks.lane), takenAt, closedAt };
  }

  describe('join window (I2)', () => {
    it('I2: pending insertions join before each model call, and the turn is closed at the final answer', async () => {
      const joined = newPending({ content: 'and one more thing' });
      const { sut, provider, mocks, turn, takenAt, closedAt } = setup({ pending: [[], [joined]] });
      provider.script(answers.tools([newToolCall('echo', { text: 'x' })]), answers.text('done'));

      await sut();

      expect(takenAt).toEqual([0, 1]);
      expect(closedAt).toEqual([2]);
      expect(turn.inputs.map((i) => i.message.content)).toEqual([
        'What is up?',
        'and one more thing',
      ]);
      expect(turn.inputs[1].archived).toBeDefined();
      expect(mocks.archive.append).toHaveBeenLastCalledWith([
        expect.objectContaining({
          role: 'user',
          content: 'and one more thing',
          metadata: expect.objectContaining({ [K.TurnId]: turn.id, [K.TurnEntry]: 'joined' }),
        }),
      ]);
      const second = provider.requests[1].messages;
      expect(second[second.length - 1]).toMatchObject({
        role: 'user',
        content: 'and one more thing',
      });
    });

    it('I2: an input pending before the first call joins that call', async () => {
      const { sut, provider } = setup({ pending: [[newPending({ content: 'typed quickly' })]] });
      provider.script(answers.text('both answered'));

      await sut();

      expect(provider.requests[0].messages.map((m) => m.content)).toEqual([
        'You are the test assistant.',
        'What is up?',
        'typed quickly',
      ]);
    });
  });

  describe('tool loop', () => {
    it('runs the tool calls and calls the model again with the group appended', async () => {
      const { sut, provider, state } = setup();
      const call = newToolCall('echo', { text: 'ping' });
      provider.script(answers.tools([call], 'Checking'), answers.text('pong'));

      const final = await sut();

      expect(final.response.content).toBe('pong');
      expect(provider.requests[1].messages.slice(-2)).toEqual([
        expect.objectContaining({ role: 'assistant', content: 'Checking', toolCalls: [call] }),
        expect.objectContaining({
          role: 'tool',
          content: '{"echoed":"ping"}',
          toolCallId: call.id,
        }),
      ]);
      expect(state.working.slice(-2).map((m) => m.role)).toEqual(['assistant', 'tool']);
    });

    it('tools are offered until maxToolIterations, then one final call is made without tools', async () => {
      const { sut, provider, mocks } = setup({ agent: { maxToolIterations: 2 } });
      provider.script(
        answers.tools([newToolCall('echo')]),
        answers.tools([newToolCall('echo')]),
        answers.tools([newToolCall('echo')], 'giving up'),
      );

      const final = await sut();

      expect(provider.requests.map((r) => r.tools?.length)).toEqual([1, 1, undefined]);
      expect(mocks.events.of('tool:execute').filter((e) => e.phase === 'end')).toHaveLength(2);
      expect(final.sent.tools).toEqual([]);
      expect(final.response.content).toBe('giving up');
    });

    it('C1: the session maxToolIterations wins over the module option', async () => {
      const { sut, provider } = setup({
        agent: { maxToolIterations: 5 },
        settings: { maxToolIterations: 1 },
      });
      provider.script(answers.tools([newToolCall('echo')]), answers.text('final'));

      await sut();

      expect(provider.requests.map((r) => r.tools?.length)).toEqual([1, undefined]);
    });

    it('maxToolIterations 0: the first call is already made without tools', async () => {
      const { sut, provider } = setup({ agent: { maxToolIterations: 0 } });
      provider.script(answers.tools([newToolCall('echo')], 'no tools for me'));

      const final = await sut();

      expect(provider.requests[0].tools).toBeUndefined();
      expect(final.response.content).toBe('no tools for me');
    });

    it('a call of a tool that was not offered gets the unknown-tool result and the loop goes on', async () => {
      const { sut, provider, mocks } = setup({ noTools: true });
      provider.script(answers.tools([newToolCall('echo')], 'hallucinated'), answers.text('done'));

      const final = await sut();

      expect(provider.requests).toHaveLength(2);
      const group = mocks.archive.append.mock.calls[0][0];
      expect(group.map((m) => [m.role, m.content])).toEqual([
        ['assistant', 'hallucinated'],
        ['tool', expect.stringContaining('Unknown tool \\"echo\\"')],
      ]);
      expect(final.response.content).toBe('done');
    });

    it('a last allowed call that still asks for tools and says nothing ends the turn with a reason', async () => {
      const { sut, provider } = setup({ settings: { maxToolIterations: 1 } });
      provider.script(
        answers.tools([newToolCall('echo', { text: 'a' })]),
        answers.tools([newToolCall('echo', { text: 'b' })]),
      );

      await expect(sut()).rejects.toThrow(/still asked for tools after 1 rounds/);
      expect(provider.requests).toHaveLength(2);
      expect(provider.requests[1].tools).toBeUndefined();
    });

    it('S3: a stop during the tool calls ends the loop before the next model call', async () => {
      const { sut, deps, provider, turn } = setup({ noTools: true });
      deps.tools.register({
        name: 'stopper',
        description: 'Stops the turn',
        parameters: { type: 'object' },
        handler: () => {
          turn.abort({});
          return 'stopped';
        },
      });
      provider.script(answers.tools([newToolCall('stopper')]));

      await expect(sut()).rejects.toBeInstanceOf(TurnAbortedError);
      expect(provider.requests).toHaveLength(1);
    });
  });

  describe('agent:llm:before', () => {
    it('H2, H3, T1: sees acceptsImages, the source of a sourced turn, the turn id and the tools offered', async () => {
      const { sut, deps, provider, turn } = setup({
        inputs: [{ content: 'nightly report', source: 'scheduler', platform: 'cron' }],
        provider: new ScriptedModel({ capabilities: { vision: true } }),
      });
      const seen = recordLlmBefore(deps);
      provider.script(answers.text('ok'));

      await sut();

      expect(seen).toEqual([
        {
          messages: expect.any(Array),
          tools: deps.tools.definitions(),
          acceptsImages: true,
          sessionId: SESSION_ID,
          source: 'scheduler',
          turnId: turn.id,
          platform: 'cron',
          inputs: turn.inputs,
          model: { provider: 'scripted', model: 'scripted-model' },
          signal: turn.signal,
        },
      ]);
    });

    it('H3: a human turn has no source', async () => {
      const { sut, deps, provider } = setup();
      const seen = recordLlmBefore(deps);
      provider.script(answers.text('ok'));

      await sut();

      expect(seen[0]).not.toHaveProperty('source');
      expect(seen[0].acceptsImages).toBe(false);
    });

    it('R1: prompt contributions are materialised before agent:llm:before', async () => {
      const { sut, deps, provider } = setup();
      deps.prompts.register(
        { key: 'facts', bucket: 'memorySummary', build: () => 'Known facts' },
        'memory',
      );
      let seen: ModelMessage[] = [];
      deps.hooks.use('agent:llm:before', async (ctx, next) => {
        seen = ctx.messages;
        await next();
      });
      provider.script(answers.text('ok'));

      await sut();

      expect(seen.map((m) => m.content)).toEqual([
        'You are the test assistant.',
        'Known facts',
        'What is up?',
      ]);
      expect(seen[1].metadata).toEqual({ injector: 'memory/facts', bucket: 'memorySummary' });
    });

    it('may change the messages and tools of the call', async () => {
      const { sut, deps, provider } = setup();
      deps.hooks.use('agent:llm:before', async (ctx, next) => {
        ctx.messages.push({ role: 'system', content: 'Answer briefly.' });
        ctx.tools = [];
        await next();
      });
      provider.script(answers.tools([newToolCall('echo')], 'short'), answers.text('shorter'));

      const final = await sut();

      expect(provider.requests[0].tools).toBeUndefined();
      expect(provider.requests[0].messages.at(-1)).toEqual({
        role: 'system',
        content: 'Answer briefly.',
      });
      // The tool the hook took away is not run, though it is registered.
      const result = provider.requests[1].messages.find((m) => m.role === 'tool');
      expect(result?.content).toContain('Unknown tool');
      expect(final.response.content).toBe('shorter');
    });

    it('S3: a stop while agent:llm:before runs prevents the call', async () => {
      const { sut, deps, provider, mocks, turn } = setup();
      deps.hooks.use('agent:llm:before', async (_ctx, next) => {
        turn.abort({});
        await next();
      });

      await expect(sut()).rejects.toBeInstanceOf(TurnAbortedError);
      expect(provider.requests).toHaveLength(0);
      expect(mocks.events.of('token:usage')).toEqual([]);
    });
  });

  describe('token:usage and agent:llm:after', () => {
    it('I12: token:usage is emitted before agent:llm:after, so a throwing middleware cannot suppress it', async () => {
      const { sut, deps, provider, mocks } = setup();
      const usageSeenByAfter: number[] = [];
      deps.hooks.use('agent:llm:after', () => {
        usageSeenByAfter.push(mocks.events.of('token:usage').length);
        throw new Error('after failed');
      });
      provider.script(answers.text('ok'));

      await expect(sut()).rejects.toThrow('after failed');
      expect(usageSeenByAfter).toEqual([1]);
      expect(mocks.events.of('token:usage')).toHaveLength(1);
    });

    it('U1: no token:usage for a call that threw', async () => {
      const { sut, provider, mocks } = setup();
      provider.script(answers.error(new Error('rate limited')));

      await expect(sut()).rejects.toThrow('rate limited');
      expect(mocks.events.of('token:usage')).toEqual([]);
    });

    it('U1, U2, U6, T1: one event per call, with the turn id, the reported prompt tokens and the history limit', async () => {
      const { sut, provider, mocks, turn } = setup({ settings: { historyLimit: 20 } });
      provider.script(
        answers.tools([newToolCall('echo')], '', { promptTokens: 321, completionTokens: 5 }),
        answers.text('done', { promptTokens: 400, completionTokens: 2 }),
      );

      await sut();

      expect(mocks.events.of('token:usage')).toEqual([
        expect.objectContaining({
          sessionId: SESSION_ID,
          turnId: turn.id,
          platform: 'web',
          used: 321,
          usageRatio: 321 / 128_000,
          contextWindow: 128_000,
          historyLimit: 20,
          trimmed: false,
        }),
        expect.objectContaining({ turnId: turn.id, used: 400 }),
      ]);
    });

    it('U5, I15: historyMessages = history at turn start + tool messages and joined inputs before the call', async () => {
      const { sut, provider, mocks } = setup({
        historyBase: 4,
        pending: [[], [newPending({ content: 'joined' })]],
      });
      provider.script(
        answers.tools([newToolCall('echo', { text: 'a' }), newToolCall('echo', { text: 'b' })]),
        answers.text('done'),
      );

      await sut();

      expect(mocks.events.of('token:usage').map((e) => e.historyMessages)).toEqual([4, 4 + 3 + 1]);
    });

    it('keeps the prompt tokens of the last call, the completion tokens of all calls and every reasoning', async () => {
      const { sut, provider, state } = setup();
      provider.script(
        answers.chunks(
          { reasoningDelta: 'first thought' },
          { toolCalls: [newToolCall('echo')] },
          { usage: { promptTokens: 100, completionTokens: 10 } },
        ),
        answers.chunks(
          { reasoningDelta: 'second thought', contentDelta: 'answer' },
          { usage: { promptTokens: 150, completionTokens: 20 } },
        ),
      );

      await sut();

      expect(state).toMatchObject({
        promptTokens: 150,
        completionTokens: 30,
        reasoning: ['first thought', 'second thought'],
        calls: 2,
      });
    });

    it('H: agent:llm:after may replace the response', async () => {
      const { sut, deps, provider } = setup();
      deps.hooks.use('agent:llm:after', async (ctx, next) => {
        ctx.response = { content: `${ctx.response.content} (reviewed)` };
        await next();
      });
      provider.script(answers.text('draft'));

      const final = await sut();

      expect(final.response).toEqual({ content: 'draft (reviewed)' });
    });

    it('H: a replaced response with tool calls continues the loop', async () => {
      const { sut, deps, provider } = setup();
      let first = true;
      deps.hooks.use('agent:llm:after', async (ctx, next) => {
        if (first)
          ctx.response = { content: '', toolCalls: [newToolCall('echo', { text: 'forced' })] };
        first = false;
        await next();
      });
      provider.script(answers.text('too early'), answers.text('after the tool'));

      const final = await sut();

      expect(provider.requests).toHaveLength(2);
      expect(provider.requests[1].messages.at(-1)).toMatchObject({
        role: 'tool',
        content: '{"echoed":"forced"}',
      });
      expect(final.response.content).toBe('after the tool');
    });

    it('H: agent:llm:after sees the messages of its own call', async () => {
      const { sut, deps, provider } = setup();
      const seen = recordLlmAfter(deps);
      provider.script(answers.tools([newToolCall('echo')]), answers.text('done'));

      await sut();

      expect(seen.map((s) => s.length)).toEqual([2, 4]);
      expect(seen[1].messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    });

    it('H: the messages given to agent:llm:after are not changed by later steps', async () => {
      const { sut, deps, provider } = setup();
      const seen = recordLlmAfter(deps);
      provider.script(answers.tools([newToolCall('echo')]), answers.text('done'));

      await sut();

      expect(seen[0].messages).toHaveLength(seen[0].length);
    });
  });
});
