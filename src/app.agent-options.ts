import { Logger } from '@nestjs/common';
import type { AgentModuleOptions } from './agent';
import type { AppConfig } from './app.config';
import { OpenAiCompatibleProvider } from './llm';
import { createSqlStores } from './session-bridge';

/**
 * The agent's options for the server, from the environment's typed config: the model provider
 * and the stores (SQLite file by default, PostgreSQL for `postgres://` URLs). Kept apart from
 * `app.module.ts` so the composition root stays small.
 */
export async function agentOptionsFromConfig(config: AppConfig): Promise<AgentModuleOptions> {
  const logger = new Logger('AppModule');
  const url = config.db.kind === 'postgres' ? config.db.url : config.db.file;
  const stores = await createSqlStores(url);
  logger.log(
    `Store: ${stores.dialect === 'postgres' ? 'PostgreSQL' : `SQLite file ${config.db.kind === 'sqlite' ? config.db.file : ''}`}`,
  );
  const options: AgentModuleOptions = {
    sessionStore: stores.sessions,
    historyStore: stores.log,
    messageArchive: stores.log,
    onShutdown: () => stores.close(),
  };
  if (!config.llm) {
    logger.warn(
      'No LLM_BASE_URL set: no model provider is configured; turns answer with a [system] notice saying how to configure one',
    );
    return options;
  }
  logger.log(`Model provider: ${config.llm.baseURL} (model ${config.llm.model ?? 'gpt-4o-mini'})`);
  return {
    ...options,
    llmProvider: new OpenAiCompatibleProvider({
      baseURL: config.llm.baseURL,
      apiKey: config.llm.apiKey,
      defaultModel: config.llm.model ?? 'gpt-4o-mini',
    }),
  };
}
