import {
  createSqlStores,
  LeaseFencing,
  WorkDispatcher,
  type AgentEventMap,
  type SqlStores,
} from '../../src';
import type { DistributedDispatcher } from '../../src/distribution/redis/distributed.dispatcher';
import { FakeOpenAiServer } from '../../src/testing';
import { tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { AgentHarness } from './agent-harness';
import { deletePrefix, REDIS_URL, testPrefix } from './redis-test';

/** One distributed instance: an AgentModule application with its own stores and Redis clients. */
export interface DistributedApp {
  id: string;
  harness: AgentHarness;
  stores: SqlStores;
  /** The instance's `DistributedDispatcher` (what `AgentModule` bound as `WorkDispatcher`). */
  dispatcher: DistributedDispatcher;
}

/**
 * Instances of the agent in one process as a library host runs them (`AgentModule.forRoot({
 * distribution })`, PostgreSQL stores made with a `LeaseFencing`), sharing one Redis prefix, one
 * database and one fake model server. `close()` stops them all (newest first).
 */
export class DistributedApps {
  readonly apps: DistributedApp[] = [];

  constructor(
    private readonly setup: {
      server: FakeOpenAiServer;
      dbUrl: string;
      prefix: string;
      leaseMs?: number;
      /** Called with each instance's stores before its application starts (to wrap them). */
      onStores?: (stores: SqlStores, id: string) => void;
    },
  ) {}

  /** Starts one more instance named `id`. */
  async start(id: string): Promise<DistributedApp> {
    const stores = await createSqlStores(this.setup.dbUrl, { fencing: new LeaseFencing() });
    this.setup.onStores?.(stores, id);
    let harness: AgentHarness;
    try {
      harness = await AgentHarness.start({
        server: this.setup.server,
        agent: {
          sessionStore: stores.sessions,
          historyStore: stores.log,
          messageArchive: stores.log,
          inputInbox: stores.inbox,
          distribution: {
            redis: REDIS_URL,
            stores,
            instanceId: id,
            prefix: this.setup.prefix,
            leaseMs: this.setup.leaseMs ?? 2_000,
          },
        },
      });
    } catch (error) {
      await stores.close();
      throw error;
    }
    const dispatcher = harness.app.get<DistributedDispatcher>(WorkDispatcher);
    const app = { id, harness, stores, dispatcher };
    this.apps.push(app);
    return app;
  }

  /** The instances on which a turn with id `turnId` started. */
  ranOn(turnId: string): DistributedApp[] {
    return this.apps.filter((a) =>
      a.harness.of('agent:turn:start').some((e) => e.turnId === turnId),
    );
  }

  /** Every instance's events of one name, in each instance's order. */
  all<K extends keyof AgentEventMap>(name: K): AgentEventMap[K][] {
    return this.apps.flatMap((a) => a.harness.of(name));
  }

  /** Resolves with the first turn start (on any instance) that matches. */
  turnStart(
    match: (e: AgentEventMap['agent:turn:start']) => boolean,
  ): Promise<AgentEventMap['agent:turn:start']> {
    return Promise.race(this.apps.map((a) => a.harness.waitFor('agent:turn:start', match)));
  }

  /** Closes every instance, newest first, then its stores. */
  async close(): Promise<void> {
    for (const app of this.apps.splice(0).reverse()) {
      await app.harness.close().catch(() => undefined);
      await app.stores.close().catch(() => undefined);
    }
  }
}

/** Polls `done` every 10 ms until it holds, for up to `ms` (5 s by default). */
export async function waitFor(
  done: () => boolean | Promise<boolean>,
  what = 'a condition',
  ms = 5_000,
): Promise<void> {
  const until = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** What {@link useDistributedApps} gives each test. */
export interface DistributedAppsFixture {
  readonly server: FakeOpenAiServer;
  readonly prefix: string;
  readonly apps: DistributedApps;
}

/**
 * The set-up of a suite of instances in one process: before each test a fake model server, a
 * PostgreSQL schema, a Redis key prefix and a `DistributedApps` on them; after it the instances
 * closed and all of it removed. Call inside the suite's `describe`.
 */
export function useDistributedApps(): DistributedAppsFixture {
  let current: (DistributedAppsFixture & { db: TempDb }) | undefined;
  const get = () => {
    if (!current) throw new Error('useDistributedApps: used outside a test');
    return current;
  };
  beforeEach(async () => {
    const server = await FakeOpenAiServer.start();
    const db = await tempPgSchema();
    const prefix = testPrefix();
    current = { server, db, prefix, apps: new DistributedApps({ server, dbUrl: db.url, prefix }) };
  });
  afterEach(async () => {
    const { server, apps, prefix, db } = get();
    current = undefined;
    server.release();
    await apps.close();
    await server.close();
    await deletePrefix(prefix);
    await db.drop();
  });
  return {
    get server() {
      return get().server;
    },
    get prefix() {
      return get().prefix;
    },
    get apps() {
      return get().apps;
    },
  };
}
