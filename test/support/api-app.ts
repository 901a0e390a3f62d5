import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { Test, type TestingModuleBuilder } from '@nestjs/testing';
import { io, type Socket as ClientSocket } from 'socket.io-client';
import request from 'supertest';
import {
  API_MODULE_OPTIONS,
  type AgentApiModuleOptions,
  type ClientToServerEvents,
  type ServerToClientEvents,
} from '../../src/api';
import { loadAppConfig } from '../../src/app.config';
import { AppModule } from '../../src/app.module';
import {
  resolveServerOptions,
  SERVER_OPTIONS,
  setupServer,
  type ServerOptions,
} from '../../src/server';
import type { AgentEventMap } from '../../src/contracts';
import { FakeOpenAiServer } from '../../src/testing';

/** The admin token of test applications. */
export const TEST_TOKEN = 'test-admin-token-0123456789abcdef';

/** A Socket.IO client of the `/agent` namespace, typed with the socket event maps. */
export type AgentClient = ClientSocket<ServerToClientEvents, ClientToServerEvents>;

/** Limits so high that no test trips them unless it asks to. */
const UNLIMITED = { limit: 1_000_000, ttlMs: 60_000 };

let instance = 0;

/** Options of {@link ApiApp.start}. */
export interface ApiAppOptions {
  /** A running fake model server; one is started (and closed) when omitted. */
  server?: FakeOpenAiServer;
  /**
   * `AgentApiModule` options other than the token (rate limits default to effectively none),
   * and the server's own (`http`, `shutdownGraceMs`).
   */
  api?: Omit<AgentApiModuleOptions, 'adminToken'> & ServerOptions;
  /** Extra environment for `AppModule` (read once while compiling). */
  env?: Record<string, string | undefined>;
  /** Changes the testing module before it compiles (e.g. `overrideProvider` of a store). */
  override?: (builder: TestingModuleBuilder) => TestingModuleBuilder;
}

/**
 * The whole server (`AppModule` as `main.ts` builds it: `bodyParser: false` + `setupServer`) in
 * a TestingModule, listening on port 0 of 127.0.0.1, its model being a real local
 * OpenAI-compatible server.
 */
export class ApiApp {
  private readonly clients = new Set<AgentClient>();
  private readonly modelCallWaiters: ((body: any) => void)[] = [];

  private constructor(
    readonly app: INestApplication,
    readonly url: string,
    readonly server: FakeOpenAiServer,
    private readonly ownsServer: boolean,
    private readonly dbFile: string,
  ) {
    const previous = server.onRequest;
    server.onRequest = (received) => {
      previous?.(received);
      if (received.method !== 'POST' || !received.path.endsWith('/chat/completions')) return;
      for (const resolve of this.modelCallWaiters.splice(0)) resolve(received.body);
    };
  }

  static async start(options: ApiAppOptions = {}): Promise<ApiApp> {
    const server = options.server ?? (await FakeOpenAiServer.start());
    const dbFile = join(tmpdir(), `agent-api-e2e-${process.pid}-${++instance}.sqlite`);
    const env: Record<string, string | undefined> = {
      LLM_BASE_URL: server.url,
      LLM_MODEL: 'test-model',
      LLM_API_KEY: undefined,
      AGENT_ADMIN_TOKEN: TEST_TOKEN,
      AGENT_DB: dbFile,
      REDIS_URL: undefined,
      PORT: undefined,
      HOST: undefined,
      HTTP_HEADERS_TIMEOUT_MS: undefined,
      HTTP_REQUEST_TIMEOUT_MS: undefined,
      HTTP_KEEP_ALIVE_TIMEOUT_MS: undefined,
      HTTP_MAX_CONNECTIONS: undefined,
      HTTP_PUBLIC_RATE_LIMIT: undefined,
      HTTP_ADMIN_RATE_LIMIT: undefined,
      HTTP_AUTH_RATE_LIMIT: undefined,
      TRUST_PROXY: undefined,
      AGENT_MCP_CONFIG: undefined,
      ...options.env,
    };
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    assignEnv(env);
    try {
      const { http, shutdownGraceMs, ...api } = options.api ?? {};
      let builder = Test.createTestingModule({ imports: [AppModule] })
        .overrideProvider(API_MODULE_OPTIONS)
        .useValue({
          adminToken: TEST_TOKEN,
          rateLimits: { public: UNLIMITED, admin: UNLIMITED, auth: UNLIMITED },
          ...api,
        } satisfies AgentApiModuleOptions);
      if (http || shutdownGraceMs !== undefined) {
        const server = { http: { ...loadAppConfig().http, ...http }, shutdownGraceMs };
        builder = builder.overrideProvider(SERVER_OPTIONS).useValue(resolveServerOptions(server));
      }
      const moduleRef = await (options.override?.(builder) ?? builder).compile();
      const app = moduleRef.createNestApplication({ bodyParser: false, logger: false });
      setupServer(app);
      await app.listen(0, '127.0.0.1');
      const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
      return new ApiApp(app, url, server, !options.server, dbFile);
    } finally {
      assignEnv(saved);
    }
  }

  /** A supertest client of the application. */
  http() {
    return request(this.url);
  }

  /** Starts a `POST /agent/messages?wait=true` with the token now (supertest is lazy). */
  postAndWait(body: object) {
    return this.http()
      .post('/agent/messages?wait=true')
      .set(this.auth)
      .send(body)
      .then((r) => r);
  }

  /** `Authorization` header with the admin token. */
  get auth(): { Authorization: string } {
    return { Authorization: `Bearer ${TEST_TOKEN}` };
  }

  /** The application's event emitter (the agent's events). */
  get emitter(): EventEmitter2 {
    return this.app.get(EventEmitter2);
  }

  /** Resolves with the next agent event of `name` that matches. */
  nextEvent<K extends keyof AgentEventMap>(
    name: K,
    match: (payload: AgentEventMap[K]) => boolean = () => true,
  ): Promise<AgentEventMap[K]> {
    return new Promise((resolve) => {
      const listener = (payload: AgentEventMap[K]) => {
        if (!match(payload)) return;
        this.emitter.off(name, listener);
        resolve(payload);
      };
      this.emitter.on(name, listener);
    });
  }

  /**
   * Resolves with the body of the next chat-completions request the model server receives
   * (call it before causing the request). With a `hold` script, the answer is held by then.
   */
  nextModelCall(): Promise<any> {
    return new Promise((resolve) => this.modelCallWaiters.push(resolve));
  }

  /** A socket of `/agent` (not connected yet; `null`: no auth); closed with the application. */
  socket(auth: Record<string, unknown> | null = { token: TEST_TOKEN }): AgentClient {
    const socket: AgentClient = io(`${this.url}/agent`, {
      ...(auth ? { auth } : {}),
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
    });
    this.clients.add(socket);
    return socket;
  }

  /** A connected socket of `/agent`. */
  async connect(auth?: Record<string, unknown> | null): Promise<AgentClient> {
    const socket = this.socket(auth);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('connect_error', reject);
    });
    return socket;
  }

  async close(): Promise<void> {
    for (const socket of this.clients) socket.disconnect();
    await this.app.close();
    if (this.ownsServer) await this.server.close();
    rmSync(this.dbFile, { force: true });
  }
}

function assignEnv(env: Record<string, string | undefined>): void {
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
}

/** Resolves with the first `event` the socket receives that matches. */
export function nextSocketEvent<E extends keyof ServerToClientEvents>(
  socket: AgentClient,
  event: E,
  match: (payload: Parameters<ServerToClientEvents[E]>[0]) => boolean = () => true,
): Promise<Parameters<ServerToClientEvents[E]>[0]> {
  return new Promise((resolve) => {
    const listener = (payload: Parameters<ServerToClientEvents[E]>[0]) => {
      if (!match(payload)) return;
      (socket.off as (e: string, l: unknown) => void)(event, listener);
      resolve(payload);
    };
    (socket.on as (e: string, l: unknown) => void)(event, listener);
  });
}

/** Every server event a socket receives, in order. */
export function recordSocket(socket: AgentClient): { event: string; payload: any }[] {
  const seen: { event: string; payload: any }[] = [];
  socket.onAny((event: string, payload: unknown) => seen.push({ event, payload }));
  return seen;
}
