import { Inject, Injectable } from '@nestjs/common';
import type { ModelMessage, TokenUsageEvent } from '../contracts';
import { historyToModelMessages } from '../prompt';
import { tokenBudgetFor } from './agent.options';
import { AGENT_TURN_DEPS } from './agent.tokens';
import type { TurnDeps } from './engine';

/**
 * `token:request` snapshots (U1, U5, T2): the estimate of what the session's next model call
 * would carry now (system prompt, contributions built with `dryRun`, active history within the
 * limit, tool definitions), without calling the model and without a turn id.
 */
@Injectable()
export class UsageSnapshots {
  constructor(@Inject(AGENT_TURN_DEPS) private readonly deps: TurnDeps) {}

  async snapshot(sessionId: string): Promise<TokenUsageEvent> {
    const { deps } = this;
    const settings = await deps.sessions.get(sessionId);
    const resolved = deps.models.resolve(settings?.model);
    const contextWindow = resolved?.capabilities.contextWindow ?? deps.options.contextWindow;
    const maxTokens = resolved?.capabilities.maxOutputTokens ?? deps.options.maxOutputTokens;
    const historyLimit = settings?.historyLimit ?? deps.options.historyLimit;
    const stored = await deps.history.history(sessionId, { limit: historyLimit });
    const base: ModelMessage[] = [
      {
        role: 'system',
        content: deps.options.systemPrompt,
        metadata: { injector: 'persona', bucket: 'persona' },
      },
      ...historyToModelMessages(stored, { room: settings?.kind === 'room' }),
    ];
    const messages = await deps.prompts.materialise(base, {
      sessionId,
      inputs: [],
      signal: new AbortController().signal,
      dryRun: true,
    });
    const tools = deps.tools.definitions();
    const encoding = deps.estimator.encodingFor(
      resolved?.ref.model ?? '',
      resolved?.capabilities.encoding,
    );
    return deps.usage.buildEventAsync({
      sessionId,
      messages,
      tools,
      encoding,
      contextWindow,
      maxTokens,
      tokenBudget: tokenBudgetFor(deps.options, { contextWindow, maxOutputTokens: maxTokens }),
      trimmed: false,
      historyMessages: await deps.history.count(sessionId),
      historyLimit,
    });
  }
}
