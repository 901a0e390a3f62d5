import {
  TurnAbortedError,
  type ModelMessage,
  type ToolDefinition,
} from '../../../../../src/contracts';
import { callModel } from '../../../../../src/agent/engine/phases/model-step';
import { useEngineSpec, type TurnStateOptions } from '../../../../support/engine-spec';
import {
  answers,
  ECHO_DEFINITION,
  HeldAnswer,
  newSystemMessage,
  newToolCall,
  ScriptedModel,
  SESSION_ID,
} from '../../../../support/turn-fixtures';

describe('callModel (model step)', () => {
  const spec = useEngineSpec();

  function setup(options: TurnStateOptions = {}) {
    const fixture = spec.turnState({ inputs: [{ content: 'Draw me a cat' }], ...options });
    const messages: ModelMessage[] = [
      newSystemMessage(),
      { role: 'user', content: 'Draw me a cat' },
    ];
    return {
      ...fixture,
      sut: (list: ModelMessage[] = messages, tools: ToolDefinition[] = []) =>
        callModel(fixture.deps, fixture.state, { messages: list, tools, untrimmedHistory: 0 }),
    };
  }

  describe('streaming provider', () => {
    it('T1: every chunk goes out as outbound:stream with the turn id, as delta / reasoningDelta', async () => {
      const { sut, mocks, provider, turn } = setup();
      provider.script(
        answers.chunks(
          { reasoningDelta: 'thinking' },
          { contentDelta: 'Hel' },
          { contentDelta: 'lo', reasoningDelta: ' more' },
          { usage: { promptTokens: 12 } },
        ),
      );

      const response = await sut();

      expect(mocks.events.of('outbound:stream')).toEqual([
        { sessionId: SESSION_ID, turnId: turn.id, seq: 1, reasoningDelta: 'thinking' },
        { sessionId: SESSION_ID, turnId: turn.id, seq: 2, delta: 'Hel' },
        { sessionId: SESSION_ID, turnId: turn.id, seq: 3, delta: 'lo', reasoningDelta: ' more' },
      ]);
      expect(response).toEqual({
        content: 'Hello',
        reasoningContent: 'thinking more',
        toolCalls: undefined,
        usage: { promptTokens: 12 },
      });
    });

    it('chunks without text (tool calls, usage) send nothing; no stream-end marker here', async () => {
      const { sut, mocks, provider } = setup();
      provider.script(answers.tools([newToolCall('echo')], '', { promptTokens: 3 }));

      await sut();

      expect(mocks.events.of('outbound:stream')).toEqual([]);
      expect(mocks.events.emitted.map((e) => e.name)).toEqual(['token:usage']);
    });

    it('tool calls: the last non-empty list wins', async () => {
      const { sut, provider } = setup();
      const first = newToolCall('echo', { text: 'a' });
      const second = [newToolCall('echo', { text: 'b' }), newToolCall('echo', { text: 'c' })];
      provider.script(
        answers.chunks({ toolCalls: [first] }, { toolCalls: second }, { toolCalls: [] }, {}),
      );

      const response = await sut();

      expect(response.toolCalls).toEqual(second);
    });

    it('usage reported over several chunks is merged', async () => {
      const { sut, provider } = setup();
      provider.script(
        answers.chunks(
          { contentDelta: 'x', usage: { promptTokens: 100 } },
          { usage: { completionTokens: 7 } },
          { usage: { completionTokens: 9, totalTokens: 109 } },
        ),
      );

      const response = await sut();

      expect(response.usage).toEqual({ promptTokens: 100, completionTokens: 9, totalTokens: 109 });
    });

    it('an answer without reasoning has no reasoningContent', async () => {
      const { sut, provider } = setup();
      provider.script(answers.text('plain'));

      await expect(sut()).resolves.toMatchObject({ content: 'plain', reasoningContent: undefined });
    });
  });

  describe('request', () => {
    it('sends the model name, its maximum output, the session think setting, the resolved capabilities and the turn signal', async () => {
      const { sut, provider, turn } = setup({ settings: { think: true } });
      provider.script(answers.text('ok'));

      await sut();

      expect(provider.requests).toHaveLength(1);
      expect(provider.requests[0]).toMatchObject({
        model: 'scripted-model',
        maxTokens: 1024,
        think: true,
        signal: turn.signal,
        tools: undefined,
        capabilities: { contextWindow: 128_000, maxOutputTokens: 1024, vision: false, tools: true },
      });
    });

    it('sends the tools when some are offered and the model takes tools', async () => {
      const { sut, provider } = setup();
      provider.script(answers.text('ok'));

      await sut(undefined, [ECHO_DEFINITION]);

      expect(provider.requests[0].tools).toEqual([ECHO_DEFINITION]);
    });

    it('leaves the tools out for a model without tool support', async () => {
      const { sut, provider } = setup({
        provider: new ScriptedModel({ capabilities: { tools: false } }),
      });
      provider.script(answers.text('ok'));

      await sut(undefined, [ECHO_DEFINITION]);

      expect(provider.requests[0].tools).toBeUndefined();
    });

    it('H2: images are stripped from the request when the model cannot see them', async () => {
      const { sut, provider } = setup();
      const withImage: ModelMessage = {
        role: 'user',
        content: 'look',
        images: ['data:image/png;base64,AA'],
      };
      provider.script(answers.text('ok'));

      await sut([newSystemMessage(), withImage]);

      expect(provider.requests[0].messages[1]).toEqual({ role: 'user', content: 'look' });
      expect(withImage.images).toEqual(['data:image/png;base64,AA']);
    });

    it.each([
      [
        'the provider reports vision',
        { provider: new ScriptedModel({ capabilities: { vision: true } }) },
      ],
      [
        'a per-model capability override says so',
        { agent: { modelCapabilities: { 'scripted-model': { vision: true } } } },
      ],
    ])('H2: images are kept when %s', async (_case, options: TurnStateOptions) => {
      const { sut, provider } = setup(options);
      const withImage: ModelMessage = {
        role: 'user',
        content: 'look',
        images: ['https://x/cat.png'],
      };
      provider.script(answers.text('ok'));

      await sut([withImage]);

      expect(provider.requests[0].messages[0].images).toEqual(['https://x/cat.png']);
    });
  });

  it('I12: the call records its token:usage as soon as it answered, with the model that answered', async () => {
    const { sut, mocks, provider } = setup();
    provider.script(
      answers.chunks(
        { contentDelta: 'hi' },
        { usage: { promptTokens: 12 }, responseModel: 'm-2025', finishReason: 'stop' },
      ),
    );

    const response = await sut();

    expect(mocks.events.of('token:usage')).toHaveLength(1);
    expect(response).toMatchObject({ responseModel: 'm-2025', finishReason: 'stop' });
  });

  describe('provider without streaming', () => {
    it('I16: is called once and its whole answer goes out as one chunk', async () => {
      const { sut, mocks, provider, turn } = setup({
        provider: new ScriptedModel({ streaming: false }),
      });
      provider.script(
        answers.chunks(
          { reasoningDelta: 'because' },
          { contentDelta: 'The whole ' },
          { contentDelta: 'answer' },
          { usage: { promptTokens: 30, completionTokens: 4 } },
        ),
      );

      const response = await sut();

      expect(provider.chat).toHaveBeenCalledTimes(1);
      expect(mocks.events.of('outbound:stream')).toEqual([
        {
          sessionId: SESSION_ID,
          turnId: turn.id,
          seq: 1,
          delta: 'The whole answer',
          reasoningDelta: 'because',
        },
      ]);
      expect(response).toEqual({
        content: 'The whole answer',
        reasoningContent: 'because',
        usage: { promptTokens: 30, completionTokens: 4 },
      });
    });

    it('I16: an answer with tool calls only sends no chunk', async () => {
      const { sut, mocks, provider } = setup({ provider: new ScriptedModel({ streaming: false }) });
      const call = newToolCall('echo', { text: 'x' });
      provider.script(answers.tools([call]));

      const response = await sut();

      expect(mocks.events.of('outbound:stream')).toEqual([]);
      expect(mocks.events.emitted.map((e) => e.name)).toEqual(['token:usage']);
      expect(response.toolCalls).toEqual([call]);
    });

    it('S3: a stop while chat runs ends the call with TurnAbortedError and sends nothing', async () => {
      const { sut, mocks, provider, turn } = setup({
        provider: new ScriptedModel({ streaming: false }),
      });
      const held = new HeldAnswer();
      provider.script(held.step());

      const call = sut();
      await held.reached.promise;
      turn.abort({});
      held.answer({ contentDelta: 'too late' });

      await expect(call).rejects.toBeInstanceOf(TurnAbortedError);
      expect(mocks.events.emitted).toEqual([]);
    });
  });

  describe('stopping (S3)', () => {
    it('S3: a turn stopped before the call never reaches the provider', async () => {
      const { sut, provider, turn } = setup();
      turn.abort({ reason: 'test' });

      await expect(sut()).rejects.toBeInstanceOf(TurnAbortedError);
      expect(provider.requests).toHaveLength(0);
    });

    it('S3: a stop mid-stream ends the call with TurnAbortedError and no further chunk goes out', async () => {
      const { sut, mocks, provider, turn } = setup();
      const held = new HeldAnswer([{ contentDelta: 'first ' }]);
      provider.script(held.step());

      const call = sut();
      await held.reached.promise;
      turn.abort({});
      held.answer({ contentDelta: 'second' }, { contentDelta: 'third' });

      await expect(call).rejects.toBeInstanceOf(TurnAbortedError);
      expect(mocks.events.of('outbound:stream').map((e) => e.delta)).toEqual(['first ']);
    });

    it('S3: a provider error while the turn is stopped becomes TurnAbortedError', async () => {
      const { sut, provider, turn } = setup();
      const held = new HeldAnswer([{ contentDelta: 'partial' }]);
      provider.script(held.step());

      const call = sut();
      await held.reached.promise;
      turn.abort({});
      held.fail(new Error('socket hang up'));

      await expect(call).rejects.toBeInstanceOf(TurnAbortedError);
    });

    it('S3: a stream that ends normally after the stop still ends with TurnAbortedError', async () => {
      const { sut, provider, turn } = setup();
      const held = new HeldAnswer([{ contentDelta: 'all of it' }]);
      provider.script(held.step());

      const call = sut();
      await held.reached.promise;
      turn.abort({});
      held.answer();

      await expect(call).rejects.toBeInstanceOf(TurnAbortedError);
    });

    it('a provider error of a running turn propagates as is', async () => {
      const { sut, provider } = setup();
      const failure = new Error('503 upstream unavailable');
      provider.script(answers.error(failure));

      await expect(sut()).rejects.toBe(failure);
    });
  });

  it('T1: chunks name the session of the turn', async () => {
    const { deps, mocks, provider, turn, state } = spec.turnState({
      inputs: [{ sessionId: 'other-session' }],
    });
    provider.script(answers.text('hi'));

    const sent = { messages: [{ role: 'user' as const, content: 'x' }], tools: [] };
    await callModel(deps, state, { ...sent, untrimmedHistory: 0 });

    expect(mocks.events.of('outbound:stream')).toEqual([
      { sessionId: 'other-session', turnId: turn.id, seq: 1, delta: 'hi' },
    ]);
  });
});
