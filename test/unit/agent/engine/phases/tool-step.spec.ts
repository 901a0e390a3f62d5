import {
  WellKnownMetadataKeys as K,
  type IncomingMessage,
  type NewMessage,
  type ToolAfterContext,
  type ToolBeforeContext,
  type ToolCall,
  type ToolCallContext,
  type ToolSpec,
} from '../../../../../src/contracts';
import { Deferred } from '../../../../../src/agent/engine/deferred';
import { runToolCalls } from '../../../../../src/agent/engine/phases/tool-step';
import { useEngineSpec } from '../../../../support/engine-spec';
import {
  echoAppend,
  newEchoTool,
  newToolCall,
  ScriptedModel,
  SESSION_ID,
  type TurnDepsOptions,
} from '../../../../support/turn-fixtures';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('runToolCalls (tool executor)', () => {
  const spec = useEngineSpec();

  function setup(
    options: TurnDepsOptions & { lead?: Partial<IncomingMessage>; tools?: ToolSpec[] } = {},
  ) {
    const { deps, mocks, turn, state } = spec.turnState({
      ...options,
      inputs: [options.lead ?? {}],
    });
    mocks.archive.append.mockImplementation(echoAppend);
    for (const tool of options.tools ?? []) deps.tools.register(tool);
    const appended = () => mocks.archive.append.mock.calls.map(([messages]) => messages);
    return {
      sut: (toolCalls: ToolCall[], content = '', reasoningContent?: string) =>
        runToolCalls(deps, state, { content, reasoningContent, toolCalls }),
      deps,
      mocks,
      turn,
      state,
      appended,
      /** The tool results of the only persisted group. */
      persistedResults: (): NewMessage[] => appended()[0].slice(1),
    };
  }

  describe('execution', () => {
    it('runs the calls of one answer in parallel', async () => {
      const started = [new Deferred<void>(), new Deferred<void>()];
      const release = new Deferred<void>();
      const slow = (name: string, index: number): ToolSpec => ({
        name,
        description: name,
        parameters: { type: 'object' },
        handler: async () => {
          started[index].resolve();
          await release.promise;
          return name;
        },
      });
      const { sut } = setup({ tools: [slow('first', 0), slow('second', 1)] });

      const run = sut([newToolCall('first'), newToolCall('second')]);
      // Both handlers are running before either may finish: sequential execution would hang here.
      await Promise.all(started.map((d) => d.promise));
      release.resolve();

      await expect(run).resolves.toHaveLength(3);
    });

    it('returns the group in call order, not completion order', async () => {
      const aGate = new Deferred<void>();
      const bFinished = new Deferred<void>();
      const tool = (name: string, handler: () => Promise<string> | string): ToolSpec => ({
        name,
        description: name,
        parameters: { type: 'object' },
        handler,
      });
      const { sut, persistedResults } = setup({
        tools: [
          tool('a', async () => {
            await aGate.promise;
            return 'result a';
          }),
          tool('b', () => {
            bFinished.resolve();
            return 'result b';
          }),
        ],
      });
      const calls = [newToolCall('a', {}, 'pa'), newToolCall('b', {}, 'pb')];

      const run = sut(calls, 'checking');
      await bFinished.promise;
      aGate.resolve();
      const group = await run;

      expect(group.map((m) => [m.role, m.content, m.toolCallId])).toEqual([
        ['assistant', 'checking', undefined],
        ['tool', 'result a', 'pa'],
        ['tool', 'result b', 'pb'],
      ]);
      expect(persistedResults().map((m) => m.toolCallId)).toEqual(['pa', 'pb']);
    });

    it('an unknown tool becomes an error result the model can read', async () => {
      const { sut } = setup();

      const group = await sut([newToolCall('missing')]);

      expect(JSON.parse(group[1].content)).toEqual({ error: 'Unknown tool "missing"' });
    });

    it('empty arguments text runs the tool with {}', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut } = setup({ tools: [newEchoTool(seen)] });

      await sut([newToolCall('echo', '')]);

      expect(seen.map((s) => s.args)).toEqual([{}]);
    });

    it('S3: the tool receives the turn signal; a stop resolves the call with a stopped result', async () => {
      const started = new Deferred<AbortSignal>();
      const { sut, turn } = setup({
        tools: [
          {
            name: 'long',
            description: 'Never finishes on its own',
            parameters: { type: 'object' },
            handler: (_args, ctx) => {
              started.resolve(ctx.signal);
              return new Promise(() => undefined);
            },
          },
        ],
      });

      const run = sut([newToolCall('long')]);
      const signal = await started.promise;
      turn.abort({});
      const group = await run;

      expect(signal).toBe(turn.signal);
      expect(JSON.parse(group[1].content)).toEqual({ error: 'Tool "long" was stopped' });
    });
  });

  describe('call ids and tool contexts', () => {
    it('I8: each call gets its own callId, independent of the provider id', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut, mocks, persistedResults } = setup({ tools: [newEchoTool(seen)] });

      await sut([
        newToolCall('echo', { text: 'a' }, 'same'),
        newToolCall('echo', { text: 'b' }, 'other'),
      ]);

      const ids = seen.map((s) => s.ctx.callId);
      expect(ids).toEqual([expect.stringMatching(UUID), expect.stringMatching(UUID)]);
      expect(new Set(ids).size).toBe(2);
      expect(ids).not.toContain('same');
      // The provider id pairs call and result; the callId is recorded beside it (P1).
      expect(persistedResults().map((m) => [m.toolCallId, m.metadata[K.CallId]])).toEqual([
        ['same', ids[0]],
        ['other', ids[1]],
      ]);
      const executed = mocks.events.of('tool:execute');
      expect(executed.map((e) => [e.phase, e.callId])).toEqual(
        expect.arrayContaining([
          ['start', ids[0]],
          ['end', ids[0]],
          ['start', ids[1]],
          ['end', ids[1]],
        ]),
      );
    });

    it('T1, H5: the context prefers the input actor over its userId and platform', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const actor = { platform: 'im', userId: 'creator-7' };
      const { sut, turn } = setup({
        tools: [newEchoTool(seen)],
        lead: { userId: 'scheduler-bot', platform: 'cron', source: 'scheduler', actor },
      });

      await sut([newToolCall('echo', { text: 'x' })]);

      expect(seen[0].ctx).toEqual({
        sessionId: SESSION_ID,
        turnId: turn.id,
        callId: expect.stringMatching(UUID),
        userId: 'creator-7',
        platform: 'im',
        actor,
        source: 'scheduler',
        acceptsImages: false,
        signal: turn.signal,
      });
    });

    it('H5: without an actor the context uses the input userId and platform', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut } = setup({
        tools: [newEchoTool(seen)],
        lead: { userId: 'alice', platform: 'web' },
      });

      await sut([newToolCall('echo')]);

      expect(seen[0].ctx).toMatchObject({ userId: 'alice', platform: 'web', actor: undefined });
    });

    it('H2: the context carries acceptsImages of the turn model', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut } = setup({
        tools: [newEchoTool(seen)],
        provider: new ScriptedModel({ capabilities: { vision: true } }),
      });

      await sut([newToolCall('echo')]);

      expect(seen[0].ctx.acceptsImages).toBe(true);
    });
  });

  describe('agent:tool:before', () => {
    it('H: may rewrite name and args before the call runs', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut, deps, mocks } = setup({ tools: [newEchoTool(seen)] });
      deps.hooks.use('agent:tool:before', async (ctx, next) => {
        ctx.name = 'echo';
        ctx.args = { text: 'rewritten' };
        await next();
      });

      const group = await sut([newToolCall('alias', { text: 'original' })]);

      expect(seen.map((s) => s.args)).toEqual([{ text: 'rewritten' }]);
      expect(group[1].content).toBe('{"echoed":"rewritten"}');
      expect(mocks.events.of('tool:execute')[0]).toMatchObject({
        phase: 'start',
        name: 'echo',
        args: { text: 'rewritten' },
      });
    });

    it('H: a middleware that does not call next refuses the call: the tool never runs', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut, deps, persistedResults } = setup({ tools: [newEchoTool(seen)] });
      const after: ToolAfterContext[] = [];
      deps.hooks.use('agent:tool:before', () => undefined);
      deps.hooks.use('agent:tool:after', async (ctx, next) => {
        after.push({ ...ctx });
        await next();
      });

      const group = await sut([newToolCall('echo', { text: 'x' })]);

      expect(seen).toEqual([]);
      expect(JSON.parse(group[1].content)).toEqual({ error: 'The call to "echo" was refused' });
      expect(after).toEqual([expect.objectContaining({ name: 'echo', ok: false })]);
      // P1: a call that never ran still records its callId.
      expect(persistedResults()[0].metadata[K.CallId]).toEqual(expect.stringMatching(UUID));
    });

    it('P1: invalid JSON arguments never reach tool:before or the tool, and still get a callId', async () => {
      const seen: { args: unknown; ctx: ToolCallContext }[] = [];
      const { sut, deps, persistedResults } = setup({ tools: [newEchoTool(seen)] });
      const before = jest.fn((_ctx: ToolBeforeContext, next: () => Promise<void>) => next());
      deps.hooks.use('agent:tool:before', before);

      const group = await sut([newToolCall('echo', '{"text": "unterminated')]);

      expect(before).not.toHaveBeenCalled();
      expect(seen).toEqual([]);
      expect(JSON.parse(group[1].content)).toEqual({
        error: 'Tool arguments are not valid JSON: {"text": "unterminated',
      });
      expect(persistedResults()[0].metadata[K.CallId]).toEqual(expect.stringMatching(UUID));
    });

    it.each([['[1, 2]'], ['42'], ['null'], ['"text"']])(
      'arguments that are JSON but not an object (%s) never run the tool',
      async (args) => {
        const seen: { args: unknown; ctx: ToolCallContext }[] = [];
        const { sut } = setup({ tools: [newEchoTool(seen)] });

        const group = await sut([newToolCall('echo', args)]);

        expect(seen).toEqual([]);
        expect(JSON.parse(group[1].content)).toEqual({
          error: 'Tool arguments must be a JSON object',
        });
      },
    );
  });

  describe('agent:tool:after', () => {
    it('P1: may rewrite the result; keys it writes to metadata are persisted with the result', async () => {
      const { sut, deps, turn, persistedResults } = setup({ tools: [newEchoTool()] });
      deps.hooks.use('agent:tool:after', async (ctx, next) => {
        expect(ctx).toMatchObject({ name: 'echo', args: { text: 'x' }, ok: true });
        ctx.result = 'shortened';
        ctx.metadata.audit = { by: 'policy' };
        // The agent's own keys win over a middleware's.
        ctx.metadata[K.TurnId] = 'forged';
        await next();
      });

      const group = await sut([newToolCall('echo', { text: 'x' })]);

      expect(group[1].content).toBe('shortened');
      const [result] = persistedResults();
      expect(result.content).toBe('shortened');
      expect(result.metadata).toEqual({
        audit: { by: 'policy' },
        [K.TurnId]: turn.id,
        [K.CallId]: expect.stringMatching(UUID),
        [K.TokenCount]: expect.any(Object),
      });
    });
  });

  describe('persistence', () => {
    it('P1: the group is persisted in one atomic append, every message with the turn id', async () => {
      const { sut, mocks, turn, state } = setup({ tools: [newEchoTool()] });
      const calls = [newToolCall('echo', { text: 'a' }), newToolCall('echo', { text: 'b' })];

      await sut(calls, 'Let me check', 'I should echo');

      expect(mocks.archive.append).toHaveBeenCalledTimes(1);
      expect(mocks.archive.append).toHaveBeenCalledWith([
        {
          sessionId: SESSION_ID,
          role: 'assistant',
          content: 'Let me check',
          toolCalls: calls,
          reasoningContent: 'I should echo',
          metadata: { [K.TurnId]: turn.id, [K.TokenCount]: expect.any(Object) },
        },
        {
          sessionId: SESSION_ID,
          role: 'tool',
          content: '{"echoed":"a"}',
          toolCallId: calls[0].id,
          metadata: expect.objectContaining({ [K.TurnId]: turn.id }),
        },
        {
          sessionId: SESSION_ID,
          role: 'tool',
          content: '{"echoed":"b"}',
          toolCallId: calls[1].id,
          metadata: expect.objectContaining({ [K.TurnId]: turn.id }),
        },
      ]);
      expect(state.persistedAny).toBe(true);
    });

    it('persisted messages carry their token count for the encoding of the turn model', async () => {
      const { sut, deps, appended } = setup({ tools: [newEchoTool()] });
      const encoding = deps.estimator.encodingFor('scripted-model');

      const group = await sut([newToolCall('echo', { text: 'a' })], 'pre');

      appended()[0].forEach((message, i) => {
        expect(message.metadata[K.TokenCount]).toEqual({
          [encoding]: deps.estimator.countMessage(group[i], encoding),
        });
      });
    });

    it('returns the group as model messages for the working list, counted as persisted', async () => {
      const { sut, turn, appended } = setup({ tools: [newEchoTool()] });
      const call = newToolCall('echo', { text: 'a' });

      const group = await sut([call], 'pre', 'why');
      // Each model message carries the count persisted with its stored message, so no later
      // count of the working list encodes it again.
      const [assistantCount, toolCount] = appended()[0].map((m) => m.metadata[K.TokenCount]);
      expect(assistantCount).toEqual({ cl100k_base: expect.any(Number) });
      expect(toolCount).toEqual({ cl100k_base: expect.any(Number) });

      expect(group).toEqual([
        {
          role: 'assistant',
          content: 'pre',
          toolCalls: [call],
          reasoningContent: 'why',
          metadata: { turnId: turn.id, [K.TokenCount]: assistantCount },
        },
        {
          role: 'tool',
          content: '{"echoed":"a"}',
          toolCallId: call.id,
          metadata: { turnId: turn.id, [K.TokenCount]: toolCount },
        },
      ]);
    });

    it('I15: historyAdded grows by the group size (assistant message + one per result)', async () => {
      const { sut, state } = setup({ tools: [newEchoTool()] });
      state.historyAdded = 2;

      await sut([newToolCall('echo'), newToolCall('echo'), newToolCall('echo')]);

      expect(state.historyAdded).toBe(2 + 4);
    });

    it('P2: in rooms the text said before the tool calls is persisted as not sent', async () => {
      const { sut, appended } = setup({ tools: [newEchoTool()], lead: { sessionKind: 'room' } });

      await sut([newToolCall('echo')], 'Let me check that');

      expect(appended()[0][0].metadata[K.Sent]).toBe(false);
      expect(appended()[0][1].metadata).not.toHaveProperty(K.Sent);
    });

    it.each([
      ['outside rooms', { sessionKind: 'web' }, 'Let me check that'],
      ['in rooms without pre-tool text', { sessionKind: 'room' }, '  '],
    ])('P2: %s nothing is marked as not sent', async (_case, lead, content) => {
      const { sut, appended } = setup({ tools: [newEchoTool()], lead });

      await sut([newToolCall('echo')], content);

      expect(appended()[0][0].metadata).not.toHaveProperty(K.Sent);
    });

    it('an archive failure rejects (the turn ends with error)', async () => {
      const { sut, mocks, state } = setup({ tools: [newEchoTool()] });
      mocks.archive.append.mockRejectedValue(new Error('disk full'));

      await expect(sut([newToolCall('echo')])).rejects.toThrow('disk full');
      expect(state.persistedAny).toBe(false);
      expect(state.historyAdded).toBe(0);
    });
  });

  describe('tool:execute events', () => {
    it('T1: start (after tool:before) and end (after tool:after) carry turnId and callId', async () => {
      const { sut, deps, mocks, turn } = setup({ tools: [newEchoTool()] });
      deps.hooks.use('agent:tool:after', async (ctx, next) => {
        ctx.result = 'final result';
        await next();
      });

      await sut([newToolCall('echo', { text: 'x' })]);

      const [start, end] = mocks.events.of('tool:execute');
      expect(start).toEqual({
        sessionId: SESSION_ID,
        turnId: turn.id,
        callId: expect.stringMatching(UUID),
        name: 'echo',
        phase: 'start',
        args: { text: 'x' },
        seq: 1,
      });
      expect(end).toEqual({
        sessionId: SESSION_ID,
        turnId: turn.id,
        callId: start.callId,
        name: 'echo',
        phase: 'end',
        ok: true,
        result: 'final result',
        seq: 2,
      });
    });

    it('a call that fails before it runs still reports start and end (ok: false)', async () => {
      const { sut, mocks } = setup();

      await sut([newToolCall('echo', 'not json')]);

      expect(mocks.events.of('tool:execute').map((e) => [e.phase, e.ok])).toEqual([
        ['start', undefined],
        ['end', false],
      ]);
    });
  });
});
