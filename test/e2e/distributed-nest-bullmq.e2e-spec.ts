import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module, type DynamicModule, type INestApplication } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import { QueueEvents, type Job, type Queue, type Worker } from 'bullmq';
import type Redis from 'ioredis';
import {
  AgentModule,
  AgentService,
  createSqlStores,
  DistributionOptionsError,
  LeaseFencing,
  OpenAiCompatibleProvider,
  type AgentModuleOptions,
  type SqlStores,
} from '../../src';
import { WAKE_WORKER } from '../../src/distribution';
import { WakeProcessor } from '../../src/distribution/redis/wake-processor';
import { WAKE_QUEUE } from '../../src/distribution/redis/wake-queue';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema, type TempDb } from '../contracts/sql-test-db';
import { ApiApp } from '../support/api-app';
import {
  deletePrefix,
  describeRedis,
  REDIS_URL,
  redisConnection,
  testPrefix,
  testRedis,
} from '../support/redis-test';

/**
 * Distributed mode is wired the Nest way: `AgentModule.forRootAsync({ distributed: true })`
 * imports `BullModule.forRootAsync('agent', ...)` and registers the wake queue under that key,
 * its worker is a `@Processor` that `@nestjs/bullmq` discovers, and a host's own
 * `BullModule.forRoot` with its own queues lives next to it, each with its connection and prefix.
 */

const HOST_QUEUE = 'host-jobs';
const HOST_CONFIG = Symbol('host-config');

/** A host's own processor of its own queue (default BullMQ configuration). */
@Processor(HOST_QUEUE)
class HostProcessor extends WorkerHost {
  async process(job: Job<{ n: number }>): Promise<string> {
    return `host:${job.data.n}`;
  }
}

/** The host's configuration module, which the agent's options factory injects from. */
@Module({})
class HostConfigModule {
  static of(value: unknown): DynamicModule {
    return {
      module: HostConfigModule,
      providers: [{ provide: HOST_CONFIG, useValue: value }],
      exports: [HOST_CONFIG],
    };
  }
}

/** Records the jobs the worker completes from now on: the return value of a job, once done. */
function completions(worker: Worker): (id: string | undefined) => Promise<unknown> {
  const done = new Map<string | undefined, unknown>();
  const waiting = new Map<string | undefined, (value: unknown) => void>();
  worker.on('completed', (job: Job, value: unknown) => {
    done.set(job.id, value);
    waiting.get(job.id)?.(value);
  });
  return (id) =>
    done.has(id)
      ? Promise.resolve(done.get(id))
      : new Promise((resolve) => waiting.set(id, resolve));
}

describeRedis('distributed mode through @nestjs/bullmq', () => {
  describePg('on PostgreSQL', () => {
    let server: FakeOpenAiServer;
    let db: TempDb;
    let stores: SqlStores;
    let agentPrefix: string;
    let hostPrefix: string;
    let redis: Redis;
    let app: INestApplication | undefined;

    beforeEach(async () => {
      server = await FakeOpenAiServer.start();
      db = await tempPgSchema();
      stores = await createSqlStores(db.url, { fencing: new LeaseFencing() });
      agentPrefix = testPrefix();
      hostPrefix = testPrefix();
      redis = testRedis();
    });

    afterEach(async () => {
      server.release();
      await app?.close();
      app = undefined;
      await stores.close();
      await server.close();
      await Promise.all([deletePrefix(agentPrefix), deletePrefix(hostPrefix)]);
      redis.disconnect();
      await db.drop();
    });

    /** The host's agent options, from its configuration module. */
    function agentOptions(config: { prefix: string; concurrency?: number }): AgentModuleOptions {
      return {
        llmProvider: new OpenAiCompatibleProvider({
          baseURL: server.url,
          defaultModel: 'test-model',
          maxRetries: 0,
        }),
        sessionStore: stores.sessions,
        historyStore: stores.log,
        messageArchive: stores.log,
        inputInbox: stores.inbox,
        distribution: {
          redis: REDIS_URL,
          stores,
          instanceId: 'nest-host',
          prefix: config.prefix,
          leaseMs: 1_500,
          concurrency: config.concurrency ?? 3,
        },
      };
    }

    it("S1: the server's AppModule, imported whole, is distributed when REDIS_URL is set as it compiles, in one process when not", async () => {
      const env = {
        REDIS_URL,
        AGENT_DB: db.url,
        AGENT_QUEUE_PREFIX: agentPrefix,
        AGENT_INSTANCE_ID: 'whole',
      };
      const distributed = await ApiApp.start({ server, env });
      try {
        const queue = distributed.app.get<Queue>(getQueueToken(WAKE_QUEUE), { strict: false });
        expect(queue.opts.prefix).toBe(agentPrefix);
        server.enqueue({ text: 'R1' });
        const reply = await distributed.postAndWait({ sessionId: 'whole', content: 'H1' });
        expect(reply.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });
        const state = await distributed.http().get('/agent/sessions/whole').set(distributed.auth);
        expect(state.body.holder === undefined || state.body.holder === 'whole').toBe(true);
      } finally {
        await distributed.close();
      }
      // The same module class, compiled again without REDIS_URL: no queue, the turn runs here.
      const local = await ApiApp.start({ server });
      try {
        expect(() => local.app.get(getQueueToken(WAKE_QUEUE), { strict: false })).toThrow();
        server.enqueue({ text: 'R2' });
        const reply = await local.postAndWait({ sessionId: 'local', content: 'H2' });
        expect(reply.body).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R2' });
      } finally {
        await local.close();
      }
    });

    it("S1: forRootAsync({ distributed: true }) next to a host's own BullModule.forRoot: both queues work, each with its own prefix", async () => {
      let factoryCalls = 0;
      const moduleRef = await Test.createTestingModule({
        imports: [
          EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
          BullModule.forRoot({ connection: redisConnection(), prefix: hostPrefix }),
          BullModule.registerQueue({ name: HOST_QUEUE }),
          AgentModule.forRootAsync({
            distributed: true,
            imports: [HostConfigModule.of({ prefix: agentPrefix })],
            inject: [HOST_CONFIG],
            useFactory: (config: { prefix: string }) => {
              factoryCalls += 1;
              return agentOptions(config);
            },
          }),
        ],
        providers: [HostProcessor],
      }).compile();
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();

      // One options factory call feeds the agent and its BullModule configuration.
      expect(factoryCalls).toBe(1);

      // The wake queue is Nest's, under the agent's prefix; the host's queue under the host's.
      const wakeQueue = app.get<Queue>(getQueueToken(WAKE_QUEUE));
      const hostQueue = app.get<Queue>(getQueueToken(HOST_QUEUE));
      expect(wakeQueue.opts.prefix).toBe(agentPrefix);
      expect(hostQueue.opts.prefix).toBe(hostPrefix);

      // The wake worker is the agent's @Processor, made by @nestjs/bullmq with the options'
      // concurrency and lease, and started once the application is up.
      const processor = app.get<WakeProcessor>(WAKE_WORKER);
      expect(processor).toBeInstanceOf(WakeProcessor);
      expect(processor.worker.name).toBe(WAKE_QUEUE);
      expect(processor.worker.opts).toMatchObject({
        prefix: agentPrefix,
        lockDuration: 1_500,
        stalledInterval: 1_500,
      });
      expect(processor.worker.concurrency).toBe(3);
      expect(processor.isRunning()).toBe(true);

      // An input is answered (run here, where it came: the session was idle).
      server.enqueue({ text: 'R1' });
      await expect(
        app.get(AgentService).handleMessage({ sessionId: 's', content: 'H1' }),
      ).resolves.toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'R1' });

      // A job added to the queue Nest injects is processed by the agent's worker.
      const agentDone = completions(processor.worker);
      const added = await wakeQueue.add(WAKE_QUEUE, { sessionId: 'direct' });
      await expect(agentDone(added.id)).resolves.toBeUndefined();

      // The host's own processor runs the host's jobs.
      const hostDone = completions(app.get(HostProcessor).worker);
      const hostJob = await hostQueue.add('n', { n: 7 });
      await expect(hostDone(hostJob.id)).resolves.toBe('host:7');

      // Each queue's keys are under its own prefix only.
      const exists = (key: string) => redis.exists(key);
      expect(await exists(`${agentPrefix}:${WAKE_QUEUE}:id`)).toBe(1);
      expect(await exists(`${hostPrefix}:${WAKE_QUEUE}:id`)).toBe(0);
      expect(await exists(`${hostPrefix}:${HOST_QUEUE}:id`)).toBe(1);
      expect(await exists(`${agentPrefix}:${HOST_QUEUE}:id`)).toBe(0);

      // Shutdown closes the worker, the runtime and the queues in order, without errors.
      await app.close();
      app = undefined;
      expect(processor.isRunning()).toBe(false);
    });

    it("sessions taken where their input came share the instance's concurrency with wake jobs: the worker takes fewer, and a job finding every slot taken comes back later", async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [
          EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
          AgentModule.forRootAsync({
            distributed: true,
            useFactory: () => agentOptions({ prefix: agentPrefix, concurrency: 2 }),
          }),
        ],
      }).compile();
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
      const agent = app.get(AgentService);
      const { worker } = app.get<WakeProcessor>(WAKE_WORKER);
      const events = new QueueEvents(WAKE_QUEUE, {
        connection: redisConnection(),
        prefix: agentPrefix,
      });
      await events.waitUntilReady();
      try {
        expect(worker.concurrency).toBe(2);
        server.enqueue({ text: 'RX', hold: true }, { text: 'RY', hold: true }, { text: 'RZ' });
        const x = agent.handleMessage({ sessionId: 'x', content: 'HX' });
        await server.nextRequest();
        expect(worker.concurrency).toBe(1);
        const y = agent.handleMessage({ sessionId: 'y', content: 'HY' });
        await server.nextRequest();
        // Both slots are taken: z's input goes through a wake job, which finds no slot.
        const delayed = new Promise<void>((resolve) => events.once('delayed', () => resolve()));
        const z = agent.handleMessage({ sessionId: 'z', content: 'HZ' });
        await delayed;
        expect(server.requests).toHaveLength(2);
        server.release();
        const settled = await Promise.all([x, y, z]);
        expect(settled.map((s) => s.settled === 'turn' && s.reply).sort()).toEqual([
          'RX',
          'RY',
          'RZ',
        ]);
        // Once the sessions are let go (after their settlements), the worker has both slots again.
        for (const until = Date.now() + 5_000; worker.concurrency !== 2 && Date.now() < until;) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect(worker.concurrency).toBe(2);
      } finally {
        await events.close();
      }
    });
  });
});

describe('distributed mode needs the distributed extra on forRootAsync', () => {
  /** Compiles an application around `AgentModule.forRootAsync`; resolves to its start error. */
  async function startError(
    options: Parameters<typeof AgentModule.forRootAsync>[0],
  ): Promise<unknown> {
    const moduleRef = Test.createTestingModule({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentModule.forRootAsync(options),
      ],
    });
    return moduleRef.compile().then(
      async (compiled) => {
        await compiled.close();
        return undefined;
      },
      (error: unknown) => error,
    );
  }

  it('a factory that returns distribution without distributed: true stops the start with one line', async () => {
    const error = await startError({
      useFactory: () => ({ distribution: { redis: REDIS_URL, stores: {} as never } }),
    });
    expect(error).toBeInstanceOf(DistributionOptionsError);
    expect((error as Error).message).toMatch(/pass distributed: true next to useFactory/);
    expect((error as Error).message).not.toContain('\n');
  });

  it('distributed: true with a factory that returns no distribution stops the start with one line', async () => {
    const error = await startError({ distributed: true, useFactory: () => ({}) });
    expect(error).toBeInstanceOf(DistributionOptionsError);
    expect((error as Error).message).toMatch(
      /distributed: true: the options .* must give distribution$/,
    );
    expect((error as Error).message).not.toContain('\n');
  });

  it('the core entry loads no BullMQ, @nestjs/bullmq or ioredis until a module is made distributed', () => {
    // A process of its own: this file's module registry has loaded them already.
    const probe = [
      'const heavy = () => [...new Set(Object.keys(require.cache).map((p) => /node_modules\\/(bullmq|@nestjs\\/bullmq|ioredis)\\//.exec(p)?.[1]).filter(Boolean))].sort();',
      "const lib = require('./src');",
      'const atImport = heavy();',
      'lib.AgentModule.forRoot({});',
      'lib.AgentModule.forRootAsync({ useFactory: () => ({}) });',
      'const inProcess = heavy();',
      'lib.AgentModule.forRootAsync({ distributed: true, useFactory: () => ({}) });',
      'console.log(JSON.stringify({ atImport, inProcess, distributed: heavy() }));',
    ].join('\n');
    const out = execFileSync(process.execPath, ['-r', '@swc-node/register', '-e', probe], {
      cwd: join(__dirname, '../..'),
      encoding: 'utf8',
    });
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({
      atImport: [],
      inProcess: [],
      distributed: ['@nestjs/bullmq', 'bullmq', 'ioredis'],
    });
  });
});
