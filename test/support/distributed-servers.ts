import { FakeOpenAiServer } from '../../src/testing';
import { tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { distributedServerEnv, ServerProcess } from './api-process';
import { deletePrefix, testPrefix } from './redis-test';

/**
 * Server processes (`src/main.ts`) in distributed mode, as an operator runs them, around one
 * model server, one PostgreSQL schema and one Redis key prefix made fresh for each test
 * (`setUp`); `tearDown` stops every process whatever happened to it (a paused one is resumed
 * first) and removes what `setUp` made.
 */
export class DistributedServers {
  model!: FakeOpenAiServer;
  db!: TempDb;
  prefix!: string;
  private readonly procs: ServerProcess[] = [];

  async setUp(): Promise<void> {
    this.model = await FakeOpenAiServer.start();
    this.db = await tempPgSchema();
    this.prefix = testPrefix();
  }

  /**
   * Starts one more server process named `instanceId` (its URL comes with `url()`), with `env`
   * added to its environment.
   */
  start(instanceId: string, env: Record<string, string> = {}): ServerProcess {
    const { model, db, prefix } = this;
    const proc = ServerProcess.start({
      ...distributedServerEnv({ modelUrl: model.url, dbUrl: db.url, prefix, instanceId }),
      ...env,
    });
    this.procs.push(proc);
    return proc;
  }

  async tearDown(): Promise<void> {
    for (const proc of this.procs.splice(0)) {
      proc.signal('SIGCONT');
      proc.signal('SIGKILL');
      await proc.exited;
    }
    this.model.release();
    await this.model.close();
    await deletePrefix(this.prefix);
    await this.db.drop();
  }
}
