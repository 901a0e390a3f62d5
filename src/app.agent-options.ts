import { Logger } from '@nestjs/common';
import type { AgentModuleOptions } from './agent';
import type { AppConfig } from './app.config';
import { OpenAiCompatibleProvider } from './llm';

/**
 * The agent's options for the server, from the environment's typed config: the model provider
 * and the stores. Kept apart from `app.module.ts` so the composition root stays small.
 */
export function agentOptionsFromConfig(config: AppConfig): AgentModuleOptions {
  const logger = new Logger('AppModule');
  if (!config.llm) {
    logger.warn(
      'No LLM_BASE_URL set: no model provider is configured; turns answer with a [system] notice saying how to configure one',
    );
    return {};
  }
  logger.log(`Model provider: ${config.llm.baseURL} (model ${config.llm.model ?? 'gpt-4o-mini'})`);
  return {
    llmProvider: new OpenAiCompatibleProvider({
      baseURL: config.llm.baseURL,
      apiKey: config.llm.apiKey,
      defaultModel: config.llm.model ?? 'gpt-4o-mini',
    }),
  };
}
