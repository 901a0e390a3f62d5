import { Logger, type INestApplication, type Type } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import {
  AgentModule,
  HookRegistry,
  PromptAssembler,
  ToolRegistry,
  WellKnownMetadataKeys as K,
  type AgentModuleOptions,
  type IncomingMessage,
} from '../../src';
import {
  DiscoveryFeatureModule,
  DiscoveryRecorder,
  FIXTURE_CONTRIBUTION_KEY,
  FIXTURE_CONTRIBUTION_TEXT,
  FIXTURE_TOOL,
  PreprocessorFeatureModule,
  RequestScopedFeatureModule,
} from '../fixtures/discovery.fixtures';
import { AgentHarness } from '../support/agent-harness';

const FEATURE_OWNER = 'DiscoveryFeatureModule';
const CONTRIBUTION_KEY = `${FEATURE_OWNER}/${FIXTURE_CONTRIBUTION_KEY}`;

/** A TestingModule with the real AgentModule (no model) and the given feature modules. */
async function compileApp(imports: Type<unknown>[]): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      AgentModule.forRoot({}),
      ...imports,
    ],
  }).compile();
  return moduleRef.createNestApplication({ logger: false });
}

describe('discovery of @AgentHook, @AgentTool and @PromptContribution', () => {
  let app: INestApplication | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('registers the decorated methods of a feature module at app.init(), owned by the module', async () => {
    app = await compileApp([DiscoveryFeatureModule]);
    const hooks = app.get(HookRegistry);
    const tools = app.get(ToolRegistry);
    const prompts = app.get(PromptAssembler);
    expect(hooks.count()).toBe(0);

    await app.init();

    expect(hooks.count('agent:turn:after')).toBe(1);
    expect(hooks.count('agent:llm:before')).toBe(1);
    // One method with two stacked @AgentHook decorators serves both hooks.
    expect(hooks.count('agent:tool:before')).toBe(1);
    expect(hooks.count('agent:tool:after')).toBe(1);
    expect(tools.has(FIXTURE_TOOL)).toBe(true);
    expect(tools.definitions()).toContainEqual(
      expect.objectContaining({ name: FIXTURE_TOOL, parameters: expect.any(Object) }),
    );
    expect(prompts.get(CONTRIBUTION_KEY)).toMatchObject({
      key: FIXTURE_CONTRIBUTION_KEY,
      bucket: 'memorySummary',
      owner: FEATURE_OWNER,
    });
  });

  it('withdraws every registration of the module when the application closes', async () => {
    app = await compileApp([DiscoveryFeatureModule]);
    await app.init();
    const hooks = app.get(HookRegistry);
    const tools = app.get(ToolRegistry);
    const prompts = app.get(PromptAssembler);
    expect(hooks.count()).toBe(4);

    await app.close();
    app = undefined;

    expect(hooks.count()).toBe(0);
    expect(hooks.removeOwner(FEATURE_OWNER)).toBe(0);
    expect(tools.has(FIXTURE_TOOL)).toBe(false);
    expect(tools.removeOwner(FEATURE_OWNER)).toBe(0);
    expect(prompts.get(CONTRIBUTION_KEY)).toBeUndefined();
    expect(prompts.removeOwner(FEATURE_OWNER)).toBe(0);
  });

  it('ignores the decorated methods of a request-scoped provider, with a warning naming it', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      app = await compileApp([RequestScopedFeatureModule]);

      await expect(app.init()).resolves.toBe(app);

      expect(warn).toHaveBeenCalledWith(expect.stringContaining('RequestScopedAgentProvider'));
      const hooks = app.get(HookRegistry);
      expect(hooks.count('agent:turn:before')).toBe(0);
      expect(app.get(ToolRegistry).has('request_scoped_tool')).toBe(false);
      expect(app.get(PromptAssembler).list()).toHaveLength(0);
    } finally {
      warn.mockRestore();
    }
  });

  it('AgentModule.forRoot({ maxToolIterations: -1 }) fails compile() with a message naming the option', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const compiling = Test.createTestingModule({
        imports: [
          EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
          AgentModule.forRoot({ maxToolIterations: -1 }),
        ],
      }).compile();

      await expect(compiling).rejects.toThrow(/maxToolIterations/);
    } finally {
      error.mockRestore();
    }
  });
});

describe('discovered registrations in a turn', () => {
  let h: AgentHarness | undefined;

  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('T1: the hook runs, the tool runs with its ToolCallContext, and the contribution reaches the model', async () => {
    h = await AgentHarness.start({ imports: [DiscoveryFeatureModule] });
    const recorder = h.app.get(DiscoveryRecorder);
    // Runs after the fixture's priority -1 middleware only if that priority was kept.
    h.app.get(HookRegistry).use(
      'agent:llm:before',
      async (_ctx, next) => {
        recorder.hookCalls.push('runtime:llm:before');
        await next();
      },
      { priority: -0.5 },
    );
    h.server.enqueue(
      { toolCalls: [{ name: FIXTURE_TOOL, arguments: { city: 'Oslo' } }] },
      { text: 'It is 21 degrees in Oslo.' },
    );

    const settled = await h.agent.handleMessage({
      sessionId: 'disc-1',
      content: 'Weather in Oslo?',
      userId: 'u1',
      platform: 'web',
    });

    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    const turnId = settled.settled === 'turn' ? settled.turnId : 'missing';
    expect(recorder.hookCalls).toEqual([
      'agent:llm:before',
      'runtime:llm:before',
      'agent:tool:before',
      'agent:tool:after',
      'agent:llm:before',
      'runtime:llm:before',
      'agent:turn:after',
    ]);
    expect(recorder.turnsAfter).toEqual([
      expect.objectContaining({ turnId, sessionId: 'disc-1', outcome: 'replied' }),
    ]);

    expect(recorder.toolCalls).toHaveLength(1);
    const [call] = recorder.toolCalls;
    expect(call.args).toEqual({ city: 'Oslo' });
    expect(call.context).toMatchObject({ sessionId: 'disc-1', turnId, userId: 'u1' });
    expect(call.context.callId).toEqual(expect.any(String));
    expect(call.signalIsAbortSignal).toBe(true);
    expect(call.context.signal.aborted).toBe(false);
    const stored = await h.stored('disc-1');
    const toolResult = stored.find((m) => m.role === 'tool');
    expect(toolResult?.metadata[K.CallId]).toBe(call.context.callId);
    expect(JSON.parse(toolResult!.content)).toEqual({ city: 'Oslo', celsius: 21 });

    const contributionBlock = { role: 'system', content: FIXTURE_CONTRIBUTION_TEXT };
    expect(h.server.requests[0].messages).toContainEqual(contributionBlock);
    expect(h.server.requests[1].messages).toContainEqual(contributionBlock);
    // R1: built once per turn, although the turn called the model twice.
    expect(recorder.builds).toHaveLength(1);
    expect(recorder.builds[0]).toMatchObject({ sessionId: 'disc-1', dryRun: false });
    expect(recorder.builds[0].inputs.map((i) => i.message.content)).toEqual(['Weather in Oslo?']);
    expect(recorder.llmCalls[0].messages).toContainEqual(
      expect.objectContaining(contributionBlock),
    );
  });
});

describe('S5: preprocessors', () => {
  let h: AgentHarness | undefined;

  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  const input = (sessionId: string, content = 'hello'): IncomingMessage => ({
    sessionId,
    content,
    userId: 'u1',
  });

  /** Contents of the session's persisted user messages. */
  const storedInputs = async (sessionId: string) =>
    (await h!.stored(sessionId)).filter((m) => m.role === 'user').map((m) => m.content);

  it('S5: a preprocessor registered under the same name replaces the earlier one', async () => {
    h = await AgentHarness.start();
    const older = jest.fn((m: IncomingMessage, next: (m?: IncomingMessage) => Promise<void>) =>
      next({ ...m, content: `older: ${m.content}` }),
    );
    h.agent.registerPreprocessor('tagger', older);
    h.agent.registerPreprocessor('tagger', (m, next) =>
      next({ ...m, content: `newer: ${m.content}` }),
    );

    await h.agent.handleMessage(input('pre-1'));

    expect(older).not.toHaveBeenCalled();
    expect(await storedInputs('pre-1')).toEqual(['newer: hello']);
    expect(h.app.get(HookRegistry).count('agent:input:before')).toBe(1);
  });

  it('S5: preprocessors with different names run in onion order, once per input', async () => {
    h = await AgentHarness.start();
    const log: string[] = [];
    for (const name of ['outer', 'inner']) {
      h.agent.registerPreprocessor(name, async (_m, next) => {
        log.push(`${name}:before`);
        await next();
        log.push(`${name}:after`);
      });
    }

    await h.agent.handleMessage(input('pre-2'));

    expect(log).toEqual(['outer:before', 'inner:before', 'inner:after', 'outer:after']);
  });

  it('S5: a preprocessor that does not call next discards the input: no turn, no archive, one stream-end marker without turnId', async () => {
    h = await AgentHarness.start();
    h.agent.registerPreprocessor('gatekeeper', () => undefined);

    const settled = await h.agent.handleMessage(input('pre-3'));

    expect(settled).toEqual({ settled: 'discarded' });
    expect(await h.stored('pre-3')).toEqual([]);
    expect(h.server.requests).toHaveLength(0);
    expect(h.of('agent:turn:start')).toHaveLength(0);
    const ends = h.of('outbound:stream').filter((e) => e.sessionId === 'pre-3' && e.done);
    expect(ends).toHaveLength(1);
    expect(ends[0].turnId).toBeUndefined();
  });

  it('S5: a preprocessor can rewrite the content with next({ ...message, content }), and the archive shows the rewrite', async () => {
    h = await AgentHarness.start();
    h.agent.registerPreprocessor('upper', (m, next) =>
      next({ ...m, content: m.content.toUpperCase() }),
    );

    const settled = await h.agent.handleMessage(input('pre-4', 'shout this'));

    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    expect(await storedInputs('pre-4')).toEqual(['SHOUT THIS']);
    expect(h.server.requests[0].messages).toContainEqual(
      expect.objectContaining({ role: 'user', content: 'SHOUT THIS' }),
    );
  });

  it('S5: dispose withdraws the preprocessor', async () => {
    h = await AgentHarness.start();
    const gatekeeper = jest.fn();
    const dispose = h.agent.registerPreprocessor('gatekeeper', gatekeeper);

    dispose();
    const settled = await h.agent.handleMessage(input('pre-5'));

    expect(gatekeeper).not.toHaveBeenCalled();
    expect(settled).toMatchObject({ settled: 'turn' });
    expect(h.app.get(HookRegistry).count('agent:input:before')).toBe(0);
  });

  it('S5: a stale dispose does not withdraw the preprocessor that replaced it', async () => {
    h = await AgentHarness.start();
    const disposeOlder = h.agent.registerPreprocessor('tagger', (m, next) => next(m));
    h.agent.registerPreprocessor('tagger', (m, next) =>
      next({ ...m, content: `newer: ${m.content}` }),
    );

    disposeOlder();
    await h.agent.handleMessage(input('pre-6'));

    expect(await storedInputs('pre-6')).toEqual(['newer: hello']);
  });

  it('S5: preprocessors registered by a module are withdrawn on app.close()', async () => {
    h = await AgentHarness.start({
      // The feature module injects AgentService, as a host's module would with a global agent.
      agent: { isGlobal: true } as AgentModuleOptions,
      imports: [PreprocessorFeatureModule],
    });
    const hooks = h.app.get(HookRegistry);
    expect(hooks.count('agent:input:before')).toBe(1);
    await h.agent.handleMessage(input('pre-7', 'hi'));
    expect(await storedInputs('pre-7')).toEqual(['[tagged] hi']);

    const closing = h;
    h = undefined;
    await closing.close();

    expect(hooks.count('agent:input:before')).toBe(0);
  });
});
