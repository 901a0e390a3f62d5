import type { LlmProvider, ModelCapabilities, ModelRef } from '../contracts';

/** A model reference resolved to the provider that serves it. */
export interface ResolvedModel {
  provider: LlmProvider;
  ref: Required<ModelRef>;
  capabilities: ModelCapabilities;
}

/** What the registry needs from the module options. */
export interface ModelRegistryOptions {
  defaultModel?: ModelRef;
  modelCapabilities: Record<string, Partial<ModelCapabilities>>;
  contextWindow: number;
  maxOutputTokens: number;
}

/**
 * Resolves `ModelRef`s to providers and capabilities. Both parts set: that provider's model;
 * provider only: its default model; model only: the first provider that serves it; neither:
 * the configured default, else the first provider's default model.
 */
export class ModelRegistry {
  private readonly providers: LlmProvider[];

  constructor(
    providers: readonly (LlmProvider | undefined)[],
    private readonly options: ModelRegistryOptions,
  ) {
    const seen = new Set<string>();
    this.providers = providers.filter((p): p is LlmProvider => {
      if (!p || seen.has(p.id)) return false;
      seen.add(p.id);
      return true;
    });
  }

  /** Whether any provider is configured. */
  get empty(): boolean {
    return this.providers.length === 0;
  }

  /** All providers, the default first. */
  list(): readonly LlmProvider[] {
    return this.providers;
  }

  /** Resolves a reference (or the default); `undefined` when nothing serves it. */
  resolve(ref?: ModelRef): ResolvedModel | undefined {
    const wanted = ref?.model || ref?.provider ? ref : this.options.defaultModel;
    if (!wanted) {
      const first = this.providers[0];
      return first?.defaultModel ? this.build(first, first.defaultModel) : undefined;
    }
    const candidates = wanted.provider
      ? this.providers.filter((p) => p.id === wanted.provider)
      : this.providers;
    for (const provider of candidates) {
      const model = wanted.model || provider.defaultModel;
      if (model && provider.capabilities(model)) return this.build(provider, model);
    }
    return undefined;
  }

  /** One sentence telling the user why `ref` did not resolve and what to do. */
  diagnose(ref?: ModelRef): string {
    if (this.empty) {
      return 'No model provider is configured: set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL) or bind an LlmProvider.';
    }
    const wanted = ref?.model || ref?.provider ? ref : this.options.defaultModel;
    const names = this.providers.map((p) => `${p.id}${p.defaultModel ? `/${p.defaultModel}` : ''}`);
    if (!wanted) {
      return `No model is selected: set a default model or assign one to the session (providers: ${names.join(', ')}).`;
    }
    const label = `${wanted.provider ? `${wanted.provider}/` : ''}${wanted.model ?? ''}`;
    return `Model "${label}" is not served by any configured provider (available: ${names.slice(0, 5).join(', ')}${names.length > 5 ? `, and ${names.length} in total` : ''}).`;
  }

  private build(provider: LlmProvider, model: string): ResolvedModel {
    const reported = provider.capabilities(model) ?? {};
    const overrides = {
      ...this.options.modelCapabilities[model],
      ...this.options.modelCapabilities[`${provider.id}/${model}`],
    };
    const capabilities: ModelCapabilities = {
      contextWindow: this.options.contextWindow,
      maxOutputTokens: this.options.maxOutputTokens,
      vision: false,
      tools: true,
      ...reported,
      ...overrides,
    };
    return { provider, ref: { provider: provider.id, model }, capabilities };
  }
}
