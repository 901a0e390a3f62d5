/**
 * The agent of the distributed-mode benchmark (issue 17): the zero-latency model of
 * `zero-latency.ts` (a `lookup` tool call, then the answer in 8 chunks) on PostgreSQL stores,
 * in one process or with `distribution` on a shared Redis. Both modes use the same stores and
 * the same model, so what differs between them is what distribution adds. `memoryAgent` is the
 * same agent on the in-memory stores.
 */
import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitter2, EventEmitterModule } from '@nestjs/event-emitter';
import {
  AgentModule,
  AgentService,
  createSqlStores,
  LeaseFencing,
  ToolRegistry,
  type AgentModuleOptions,
  type Settlement,
} from '../../src';
import { flag } from '../../src/app.env';
import { HISTORY_LIMIT, LOOKUP_TOOL, ZeroLatencyProvider } from './zero-latency';

/** Where an instance of distributed mode shares its sessions. */
export interface DistributedSetting {
  redis: string;
  prefix: string;
  instanceId: string;
  /** Sessions the instance runs at once (the wake worker's concurrency). */
  concurrency: number;
  /** `false`: idle sessions go through a wake job even when their input came here. */
  runWhereReceived?: boolean;
}

/** An agent on PostgreSQL, in one process or one instance of distributed mode. */
export interface PgAgent {
  app: INestApplicationContext;
  agent: AgentService;
  events: EventEmitter2;
  provider: ZeroLatencyProvider;
  close(): Promise<void>;
}

/** What every agent of these benches is given besides its stores. */
function baseOptions(provider: ZeroLatencyProvider): AgentModuleOptions {
  return {
    llmProvider: provider,
    historyLimit: HISTORY_LIMIT,
    systemPrompt: 'You are a helpful assistant. Answer briefly and look things up first.',
  };
}

/**
 * Builds the agent on the PostgreSQL schema at `dbUrl` (migrated already). Its statements are
 * prepared unless `AGENT_DB_PREPARE=false`, as in the server.
 */
export async function pgAgent(
  dbUrl: string,
  distribution?: DistributedSetting,
  provider: ZeroLatencyProvider = new ZeroLatencyProvider(),
): Promise<PgAgent> {
  const prepare = flag(process.env, 'AGENT_DB_PREPARE', true);
  const stores = await createSqlStores(dbUrl, {
    prepare,
    ...(distribution ? { fencing: new LeaseFencing() } : {}),
  });
  const options: AgentModuleOptions = {
    ...baseOptions(provider),
    sessionStore: stores.sessions,
    historyStore: stores.log,
    messageArchive: stores.log,
    inputInbox: stores.inbox,
    onShutdown: () => stores.close(),
    ...(distribution ? { distribution: { ...distribution, stores, leaseMs: 10_000 } } : {}),
  };
  return started(options, provider);
}

/**
 * The same agent on the default in-memory stores, in one process: what the agent costs without
 * a database (the throughput section's ceiling of the agent's own work).
 */
export function memoryAgent(
  provider: ZeroLatencyProvider = new ZeroLatencyProvider(),
): Promise<PgAgent> {
  return started(baseOptions(provider), provider);
}

async function started(
  options: AgentModuleOptions,
  provider: ZeroLatencyProvider,
): Promise<PgAgent> {
  @Module({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      AgentModule.forRoot(options),
    ],
  })
  class PgAgentModule {}
  const app = await NestFactory.createApplicationContext(PgAgentModule, { logger: false });
  app.get(ToolRegistry).register(LOOKUP_TOOL);
  await app.init();
  return {
    app,
    agent: app.get(AgentService),
    events: app.get(EventEmitter2),
    provider,
    close: () => app.close(),
  };
}

/** Throws unless the input's turn replied. */
export function replied(settlement: Settlement): void {
  if (settlement.settled !== 'turn' || settlement.outcome !== 'replied') {
    throw new Error(`an input settled ${JSON.stringify(settlement)}`);
  }
}
