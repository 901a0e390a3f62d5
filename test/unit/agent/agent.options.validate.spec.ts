import { AgentOptionsError, type LlmProvider } from '../../../src/contracts';
import { MemoryMessageLog, MemorySessionStore } from '../../../src/session-bridge';
import { AGENT_OPTION_DEFAULTS, type AgentModuleOptions } from '../../../src/agent/agent.options';
import { parseModelRef, resolveAgentOptions } from '../../../src/agent/agent.options.validate';

/** A provider with every method the port needs. */
const makeProvider = (id = 'p1'): LlmProvider => ({
  id,
  capabilities: () => undefined,
  chat: () => Promise.resolve({ content: '' }),
});

/** Runs `resolveAgentOptions` and returns the `AgentOptionsError` it throws. */
function rejectionOf(options: AgentModuleOptions): AgentOptionsError {
  try {
    resolveAgentOptions(options);
  } catch (error) {
    expect(error).toBeInstanceOf(AgentOptionsError);
    return error as AgentOptionsError;
  }
  throw new Error(`resolveAgentOptions accepted ${JSON.stringify(options)}`);
}

describe('resolveAgentOptions', () => {
  it('applies the defaults when no option is given', () => {
    const resolved = resolveAgentOptions({});

    expect(resolved).toMatchObject({
      contextWindow: AGENT_OPTION_DEFAULTS.contextWindow,
      maxOutputTokens: AGENT_OPTION_DEFAULTS.maxOutputTokens,
      maxToolIterations: AGENT_OPTION_DEFAULTS.maxToolIterations,
      historyLimit: AGENT_OPTION_DEFAULTS.historyLimit,
      systemPrompt: AGENT_OPTION_DEFAULTS.systemPrompt,
      toolTimeoutMs: AGENT_OPTION_DEFAULTS.toolTimeoutMs,
      shutdownTimeoutMs: AGENT_OPTION_DEFAULTS.shutdownTimeoutMs,
      approvalTimeoutMs: 600_000,
      modelCapabilities: {},
    });
    expect(resolved.tokenBudget).toBeUndefined();
    expect(resolved.defaultModel).toBeUndefined();
    expect(resolveAgentOptions()).toEqual(resolved);
  });

  it('keeps the values that are given', () => {
    const resolved = resolveAgentOptions({
      contextWindow: 8192,
      maxOutputTokens: 512,
      tokenBudget: 6000,
      maxToolIterations: 3,
      historyLimit: 10,
      systemPrompt: 'Be brief.',
      toolTimeoutMs: 250,
      shutdownTimeoutMs: 1000,
      approvalTimeoutMs: 30_000,
      selfId: 'bot-1',
    });

    expect(resolved).toMatchObject({
      contextWindow: 8192,
      maxOutputTokens: 512,
      tokenBudget: 6000,
      maxToolIterations: 3,
      historyLimit: 10,
      systemPrompt: 'Be brief.',
      toolTimeoutMs: 250,
      shutdownTimeoutMs: 1000,
      approvalTimeoutMs: 30_000,
      selfId: 'bot-1',
    });
  });

  it('accepts the lower bounds (0 = no tool loop, no count limit, no drain wait)', () => {
    expect(
      resolveAgentOptions({ maxToolIterations: 0, historyLimit: 0, shutdownTimeoutMs: 0 }),
    ).toMatchObject({ maxToolIterations: 0, historyLimit: 0, shutdownTimeoutMs: 0 });
  });

  it.each<[keyof AgentModuleOptions, unknown]>([
    ['contextWindow', 255],
    ['contextWindow', 1000.5],
    ['contextWindow', '128000'],
    ['maxOutputTokens', 0],
    ['maxOutputTokens', Number.NaN],
    ['tokenBudget', 0],
    ['tokenBudget', Number.POSITIVE_INFINITY],
    ['maxToolIterations', -1],
    ['maxToolIterations', 2.5],
    ['historyLimit', -1],
    ['historyLimit', null],
    ['toolTimeoutMs', 0],
    ['shutdownTimeoutMs', -5],
    ['approvalTimeoutMs', 0],
    ['approvalTimeoutMs', '10m'],
  ])('a bad %s (%p) throws AgentOptionsError naming the option', (name, value) => {
    const error = rejectionOf({ [name]: value });

    expect(error.message).toContain(`"${name}"`);
  });

  it('a non-string systemPrompt throws, naming it', () => {
    const error = rejectionOf({ systemPrompt: 42 as unknown as string });

    expect(error.message).toContain('"systemPrompt"');
  });

  describe('defaultModel', () => {
    it("parses 'model' into a ModelRef without provider", () => {
      expect(resolveAgentOptions({ defaultModel: 'gpt-4o-mini' }).defaultModel).toEqual({
        model: 'gpt-4o-mini',
      });
    });

    it("parses 'provider/model' into provider and model", () => {
      expect(resolveAgentOptions({ defaultModel: 'ollama/llama3' }).defaultModel).toEqual({
        provider: 'ollama',
        model: 'llama3',
      });
    });

    it('splits at the first slash only, so model names may contain slashes', () => {
      expect(parseModelRef('openrouter/meta-llama/llama-3-8b')).toEqual({
        provider: 'openrouter',
        model: 'meta-llama/llama-3-8b',
      });
    });

    it('copies a ModelRef object', () => {
      const ref = { provider: 'p', model: 'm' };

      const resolved = resolveAgentOptions({ defaultModel: ref }).defaultModel;

      expect(resolved).toEqual(ref);
      expect(resolved).not.toBe(ref);
    });

    it.each(['', 'provider/'])('%p names no model and throws, naming defaultModel', (value) => {
      expect(rejectionOf({ defaultModel: value }).message).toContain('"defaultModel"');
    });
  });

  describe('ports', () => {
    it('accepts complete ports', () => {
      const log = new MemoryMessageLog();

      expect(() =>
        resolveAgentOptions({
          llmProvider: makeProvider(),
          llmProviders: [makeProvider('p2')],
          sessionStore: new MemorySessionStore(),
          historyStore: log,
          messageArchive: log,
        }),
      ).not.toThrow();
    });

    it('a provider missing chat is named with the missing method', () => {
      const { chat: _chat, ...partial } = makeProvider();

      const error = rejectionOf({ llmProvider: partial as LlmProvider });

      expect(error.message).toContain('"llmProvider"');
      expect(error.message).toContain('chat');
    });

    it('an extra provider missing capabilities is named by its position', () => {
      const { capabilities: _c, ...partial } = makeProvider('p2');

      const error = rejectionOf({ llmProviders: [makeProvider(), partial as LlmProvider] });

      expect(error.message).toContain('"llmProviders[1]"');
      expect(error.message).toContain('capabilities');
    });

    it('a session store missing methods is named with them', () => {
      const error = rejectionOf({ sessionStore: { get: async () => undefined } as never });

      expect(error.message).toContain('"sessionStore"');
      expect(error.message).toMatch(/ensure.*update/);
    });

    it('S7: a session store missing advanceGeneration (used on session deletion) is named', () => {
      const store = new MemorySessionStore();
      const partial = {
        get: store.get.bind(store),
        ensure: store.ensure.bind(store),
        update: store.update.bind(store),
        delete: store.delete.bind(store),
        generationOf: store.generationOf.bind(store),
      };

      const error = rejectionOf({ sessionStore: partial as never });

      expect(error.message).toContain('"sessionStore"');
      expect(error.message).toContain('advanceGeneration');
    });

    it('a history store missing methods is named with them', () => {
      const error = rejectionOf({ historyStore: { history: async () => [] } as never });

      expect(error.message).toContain('"historyStore"');
      expect(error.message).toMatch(/count.*clear.*rollbackTurn/);
    });

    it('a message archive that is not one is named', () => {
      const error = rejectionOf({ messageArchive: {} as never });

      expect(error.message).toContain('"messageArchive"');
      expect(error.message).toContain('append');
    });
  });
});
