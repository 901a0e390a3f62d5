import { Logger } from '@nestjs/common';
import type { AgentModuleOptions } from './agent';
import type { AppConfig } from './app.config';
import { clockTool, createProviderFromEnv, DemoProvider, describeProvider } from './llm';
import { LeaseFencing } from './distribution';
import { createSqlStores } from './session-bridge';

/**
 * The agent's options for the server, from the environment's typed config: the model provider
 * (the offline demo model when no `LLM_BASE_URL` is set) and the stores (a SQLite file by
 * default, PostgreSQL for `postgres://` URLs). Kept apart from `app.module.ts` so the
 * composition root stays small.
 */
export async function agentOptionsFromConfig(config: AppConfig): Promise<AgentModuleOptions> {
  const logger = new Logger('AppModule');
  const distribution = config.distribution;
  // Distributed mode: the stores' turn writes carry the fences of this instance's leases.
  const fencing = distribution ? new LeaseFencing() : undefined;
  const stores = await createSqlStores(
    config.db.kind === 'postgres' ? config.db.url : config.db.file,
    {
      timeoutMs: config.limits.dbTimeoutMs,
      prepare: config.db.kind !== 'postgres' || config.db.prepare,
      ...(fencing ? { fencing } : {}),
    },
  );
  logger.log(
    stores.dialect === 'postgres'
      ? 'Store: PostgreSQL'
      : `Store: SQLite file ${config.db.kind === 'sqlite' ? config.db.file : ''}`,
  );
  const llmProvider = createProviderFromEnv(config.llm ?? {});
  logger.log(describeProvider(llmProvider));
  const { maxWaiting, llmIdleTimeoutMs, turnTimeoutMs, approvalTimeoutMs } = config.limits;
  return {
    llmProvider,
    tools: llmProvider instanceof DemoProvider ? [clockTool] : [],
    sessionStore: stores.sessions,
    historyStore: stores.log,
    messageArchive: stores.log,
    inputInbox: stores.inbox,
    maxWaiting,
    llmIdleTimeoutMs,
    turnTimeoutMs,
    ...(config.mcpServers ? { mcpServers: config.mcpServers } : {}),
    approvalTimeoutMs,
    onShutdown: () => stores.close(),
    ...(distribution
      ? {
          distribution: {
            redis: distribution.redisUrl,
            stores,
            ...(distribution.instanceId ? { instanceId: distribution.instanceId } : {}),
            leaseMs: distribution.leaseMs,
            concurrency: distribution.concurrency,
            runWhereReceived: distribution.runWhereReceived,
            prefix: distribution.prefix,
          },
        }
      : {}),
  };
}
