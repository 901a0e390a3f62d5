import { Inject, Injectable } from '@nestjs/common';
import type { ModelMessage, TokenUsageEvent } from '../contracts';
import { ModelRegistry } from '../llm';
import { historyForModel, historyToModelMessages, PromptAssembler } from '../prompt';
import { TokenEstimator, UsageTracker } from '../usage';
import { AGENT_OPTIONS } from './agent.module-definition';
import { tokenBudgetFor, type ResolvedAgentOptions } from './agent.options';
import { GUARDED_STORES, type GuardedStores } from './store-guard';
import { ToolRegistry } from './tools';

/**
 * `token:request` snapshots (U1, U5, T2): the estimate of what the session's next model call
 * would carry now (system prompt, contributions built with `dryRun`, active history within the
 * limit, tool definitions), without calling the model and without a turn id.
 */
@Injectable()
export class UsageSnapshots {
  constructor(
    @Inject(GUARDED_STORES) private readonly stores: GuardedStores,
    private readonly models: ModelRegistry,
    private readonly prompts: PromptAssembler,
    private readonly tools: ToolRegistry,
    private readonly estimator: TokenEstimator,
    private readonly usage: UsageTracker,
    @Inject(AGENT_OPTIONS) private readonly options: ResolvedAgentOptions,
  ) {}

  async snapshot(sessionId: string): Promise<TokenUsageEvent> {
    const { options } = this;
    const settings = await this.stores.sessions.get(sessionId);
    const resolved = this.models.resolve(settings?.model);
    const contextWindow = resolved?.capabilities.contextWindow ?? options.contextWindow;
    const maxTokens = resolved?.capabilities.maxOutputTokens ?? options.maxOutputTokens;
    const historyLimit = settings?.historyLimit ?? options.historyLimit;
    const stored = await historyForModel(this.stores.history, sessionId, { limit: historyLimit });
    const base: ModelMessage[] = [
      {
        role: 'system',
        content: options.systemPrompt,
        metadata: { injector: 'persona', bucket: 'persona' },
      },
      ...historyToModelMessages(stored, { room: settings?.kind === 'room' }),
    ];
    const messages = await this.prompts.materialise(base, {
      sessionId,
      inputs: [],
      signal: new AbortController().signal,
      dryRun: true,
    });
    const encoding = this.estimator.encodingFor(
      resolved?.ref.model ?? '',
      resolved?.capabilities.encoding,
    );
    return this.usage.buildEventAsync({
      sessionId,
      messages,
      tools: this.tools.definitions(),
      encoding,
      contextWindow,
      maxTokens,
      tokenBudget: tokenBudgetFor(options, { contextWindow, maxOutputTokens: maxTokens }),
      trimmed: false,
      historyMessages: await this.stores.history.count(sessionId),
      historyLimit,
    });
  }
}
