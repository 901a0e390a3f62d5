import type { INestApplication, Provider, Type } from '@nestjs/common';
import { EventEmitterModule, EventEmitter2 } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import {
  AgentModule,
  AgentService,
  HistoryStore,
  OpenAiCompatibleProvider,
  type AgentEventMap,
  type AgentModuleOptions,
  type HistoryStore as HistoryStorePort,
  type Message,
} from '../../src';
import { FakeOpenAiServer } from '../../src/testing';

/** One recorded agent event. */
export interface Recorded<K extends keyof AgentEventMap = keyof AgentEventMap> {
  name: K;
  payload: AgentEventMap[K];
}

const EVENT_NAMES: (keyof AgentEventMap)[] = [
  'agent:queue',
  'token:usage',
  'outbound:message',
  'outbound:stream',
  'agent:turn:start',
  'agent:turn:end',
  'tool:execute',
  'agent:approval',
];

/**
 * A running Nest application with the real AgentModule, talking to a real local
 * OpenAI-compatible HTTP server, plus a recorder of every agent event in order.
 */
export class AgentHarness {
  readonly events: Recorded[] = [];

  private constructor(
    readonly app: INestApplication,
    readonly server: FakeOpenAiServer,
    readonly agent: AgentService,
    readonly history: HistoryStorePort,
    private readonly ownsServer: boolean,
  ) {
    const emitter = app.get(EventEmitter2);
    for (const name of EVENT_NAMES) {
      emitter.on(name, (payload: any) => this.events.push({ name, payload }));
    }
  }

  /** Starts a server (unless given) and an application around AgentModule. */
  static async start(
    options: {
      agent?: AgentModuleOptions;
      providers?: Provider[];
      /** Providers added to AgentModule itself, after its defaults (bindings by token). */
      extraProviders?: Provider[];
      imports?: Type<unknown>[];
      server?: FakeOpenAiServer;
    } = {},
  ): Promise<AgentHarness> {
    const server = options.server ?? (await FakeOpenAiServer.start());
    const moduleRef = await Test.createTestingModule({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentModule.forRoot({
          llmProvider: new OpenAiCompatibleProvider({
            baseURL: server.url,
            defaultModel: 'test-model',
            maxRetries: 0,
          }),
          ...options.agent,
          providers: options.extraProviders ?? [],
        }),
        ...(options.imports ?? []),
      ],
      providers: options.providers ?? [],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return new AgentHarness(
      app,
      server,
      app.get(AgentService),
      app.get<HistoryStorePort>(HistoryStore),
      !options.server,
    );
  }

  /** Events of one name, in order. */
  of<K extends keyof AgentEventMap>(name: K): AgentEventMap[K][] {
    return this.events.filter((e) => e.name === name).map((e) => e.payload as AgentEventMap[K]);
  }

  /** Resolves with the first event of `name` (already seen or future) that matches. */
  waitFor<K extends keyof AgentEventMap>(
    name: K,
    match: (payload: AgentEventMap[K]) => boolean = () => true,
  ): Promise<AgentEventMap[K]> {
    const seen = this.of(name).find(match);
    if (seen) return Promise.resolve(seen);
    const emitter = this.app.get(EventEmitter2);
    return new Promise((resolve) => {
      const listener = (payload: AgentEventMap[K]) => {
        if (!match(payload)) return;
        emitter.off(name, listener);
        resolve(payload);
      };
      emitter.on(name, listener);
    });
  }

  /** Persisted messages of a session, oldest first. */
  stored(sessionId: string): Promise<Message[]> {
    return this.history.history(sessionId);
  }

  async close(): Promise<void> {
    await this.app.close();
    if (this.ownsServer) await this.server.close();
  }
}
