import { AnthropicProvider } from '../../../src/llm/anthropic/anthropic.provider';
import { DemoProvider } from '../../../src/llm/demo/demo.provider';
import { OpenAiCompatibleProvider } from '../../../src/llm/openai-compatible/openai-compatible.provider';
import { createProviderFromEnv, describeProvider } from '../../../src/llm/provider-factory';

describe('createProviderFromEnv', () => {
  it('is the offline demo model when no base URL is set', () => {
    expect(createProviderFromEnv({})).toBeInstanceOf(DemoProvider);
    expect(createProviderFromEnv({ baseURL: '  ', model: 'x' })).toBeInstanceOf(DemoProvider);
  });

  it('is the OpenAI-compatible provider for a base URL, with the model or a default', () => {
    const configured = createProviderFromEnv({
      baseURL: 'http://localhost:11434/v1',
      apiKey: 'k',
      model: 'llama3.2',
    });
    const defaulted = createProviderFromEnv({ baseURL: 'http://localhost:11434/v1' });

    expect(configured).toBeInstanceOf(OpenAiCompatibleProvider);
    expect(configured).toMatchObject({ id: 'openai', defaultModel: 'llama3.2' });
    expect(defaulted.defaultModel).toBe('gpt-4o-mini');
  });

  it('is the Anthropic provider for api.anthropic.com or when the kind says so', () => {
    const byHost = createProviderFromEnv({ baseURL: 'https://api.anthropic.com/v1', apiKey: 'k' });
    const byKind = createProviderFromEnv({
      baseURL: 'http://127.0.0.1:9/',
      kind: 'anthropic',
      model: 'claude-haiku-4-5',
    });
    const forced = createProviderFromEnv({ baseURL: 'https://api.anthropic.com', kind: 'openai' });

    expect(byHost).toBeInstanceOf(AnthropicProvider);
    expect((byHost as AnthropicProvider).endpoint).toBe('https://api.anthropic.com');
    expect(byHost.defaultModel).toMatch(/^claude-/);
    expect(byKind).toBeInstanceOf(AnthropicProvider);
    expect(byKind.defaultModel).toBe('claude-haiku-4-5');
    expect(forced).toBeInstanceOf(OpenAiCompatibleProvider);
  });
});

describe('describeProvider', () => {
  it('says clearly that the demo model is offline and how to configure a real one', () => {
    const line = describeProvider(new DemoProvider());

    expect(line).toMatch(/OFFLINE DEMO model/);
    expect(line).toContain('[demo model]');
    expect(line).toContain('set LLM_BASE_URL');
    expect(line).not.toContain('\n');
  });

  it('names the endpoint and model of real providers, without credentials', () => {
    expect(
      describeProvider(
        createProviderFromEnv({ baseURL: 'http://u:secret@localhost:8080/v1/', model: 'qwen3' }),
      ),
    ).toBe(
      'Model provider: OpenAI-compatible endpoint http://localhost:8080/v1 (id openai, model qwen3)',
    );
    expect(
      describeProvider(
        createProviderFromEnv({ baseURL: 'https://api.anthropic.com', model: 'claude-x' }),
      ),
    ).toBe(
      'Model provider: Anthropic Messages API endpoint https://api.anthropic.com (id anthropic, model claude-x)',
    );
    expect(
      describeProvider({
        id: 'custom',
        capabilities: () => undefined,
        chat: async () => ({ content: '' }),
      }),
    ).toBe('Model provider: custom');
  });
});
