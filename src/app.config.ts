import { randomBytes } from 'node:crypto';
import { readMcpConfigFile, type McpServersConfig } from './agent';
import { ConfigError, flag, integer, positive, url } from './app.env';
import { trustProxyProblem, type TracingSettings, type TrustProxy } from './server';

export { ConfigError } from './app.env';

/**
 * The server's configuration, read once from the environment (README.md, "Configuration
 * (server)").
 */
export interface AppConfig {
  port: number;
  host: string;
  adminToken: string;
  /** Whether the admin token was generated at start (then it is printed once). */
  adminTokenGenerated: boolean;
  llm?: { baseURL: string; apiKey?: string; model?: string };
  /** `AGENT_DB`; for PostgreSQL also `AGENT_DB_PREPARE`. */
  db: { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; prepare: boolean };
  /** Distributed mode (`REDIS_URL` set; README, "Distributed mode"). */
  distribution?: {
    redisUrl: string;
    /** `AGENT_INSTANCE_ID`; unset: host name and pid. */
    instanceId?: string;
    /** `AGENT_LEASE_MS`. */
    leaseMs: number;
    /** `AGENT_CONCURRENCY`. */
    concurrency: number;
    /** `AGENT_QUEUE_PREFIX`. */
    prefix: string;
    /** `AGENT_RUN_WHERE_RECEIVED`. */
    runWhereReceived: boolean;
  };
  /** Bounds of the agent (README, "Configuration (server)"). */
  limits: {
    /** `AGENT_MAX_WAITING`: waiting inputs per session. */
    maxWaiting: number;
    /** `LLM_IDLE_TIMEOUT_MS`: longest silence of the model. */
    llmIdleTimeoutMs: number;
    /** `AGENT_TURN_TIMEOUT_MS`: longest turn, 0 = none. */
    turnTimeoutMs: number;
    /** `AGENT_APPROVAL_TIMEOUT_MS`: longest wait of a tool call for a person's approval. */
    approvalTimeoutMs: number;
    /** `AGENT_DB_TIMEOUT_MS`: longest wait for the database (connect, statement, busy). */
    dbTimeoutMs: number;
  };
  /** The HTTP server's timeouts (milliseconds) and connection cap. */
  http: {
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    keepAliveTimeoutMs: number;
    maxConnections: number;
  };
  /** `TRUST_PROXY`: the proxies whose `X-Forwarded-For` names the client. */
  trustProxy: TrustProxy;
  /** Requests per minute per client address (`HTTP_*_RATE_LIMIT`). */
  rateLimits: {
    public: { limit: number; ttlMs: number };
    admin: { limit: number; ttlMs: number };
    auth: { limit: number; ttlMs: number };
  };
  /** `LOG_FORMAT`: human-readable lines, or one JSON object per line. */
  logFormat: 'text' | 'json';
  /** OpenTelemetry tracing, when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_*ENDPOINT`). */
  tracing?: TracingSettings;
  /** `AGENT_MCP_CONFIG`: the MCP servers of its `{ "mcpServers": ... }` file. */
  mcpServers?: McpServersConfig;
}

function port(env: NodeJS.ProcessEnv): number {
  const raw = env.PORT ?? '3000';
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535) {
    throw new ConfigError(`PORT must be an integer from 0 to 65535, got "${raw}"`);
  }
  return value;
}

/** The HTTP server's limits; the defaults are `ApiModule`'s (README, "Configuration (server)"). */
function httpLimits(env: NodeJS.ProcessEnv): AppConfig['http'] {
  const limits = {
    headersTimeoutMs: positive(env, 'HTTP_HEADERS_TIMEOUT_MS', 30_000),
    requestTimeoutMs: positive(env, 'HTTP_REQUEST_TIMEOUT_MS', 60_000),
    keepAliveTimeoutMs: positive(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000),
    maxConnections: positive(env, 'HTTP_MAX_CONNECTIONS', 1024),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      `HTTP_HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`,
    );
  }
  return limits;
}

/** Per-minute rate limits per client address; the defaults are `ApiModule`'s. */
function rateLimits(env: NodeJS.ProcessEnv): AppConfig['rateLimits'] {
  const perMinute = (name: string, fallback: number) => ({
    limit: positive(env, name, fallback),
    ttlMs: 60_000,
  });
  return {
    public: perMinute('HTTP_PUBLIC_RATE_LIMIT', 120),
    admin: perMinute('HTTP_ADMIN_RATE_LIMIT', 1200),
    auth: perMinute('HTTP_AUTH_RATE_LIMIT', 20),
  };
}

/**
 * `TRUST_PROXY`: unset or `false`, a number of proxies in front, or a comma-separated list of
 * their addresses / subnets / `loopback`, `linklocal`, `uniquelocal`. `true` (believe anyone's
 * `X-Forwarded-For`) is refused: a client could then pick its own address for the rate limits.
 */
function trustProxy(env: NodeJS.ProcessEnv): TrustProxy {
  const raw = env.TRUST_PROXY?.trim() ?? '';
  if (raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true') {
    throw new ConfigError(
      'TRUST_PROXY=true would let any client choose its address; give the number of proxies in front (e.g. 1) or their addresses',
    );
  }
  const value: TrustProxy = /^\d+$/.test(raw) ? Number(raw) : raw.split(',').map((p) => p.trim());
  const problem = trustProxyProblem(value);
  if (problem) throw new ConfigError(`TRUST_PROXY must be ${problem}, got "${raw}"`);
  return value;
}

/** The agent's bounds. */
function limits(env: NodeJS.ProcessEnv): AppConfig['limits'] {
  return {
    maxWaiting: integer(env, 'AGENT_MAX_WAITING', 1000, 1),
    llmIdleTimeoutMs: integer(env, 'LLM_IDLE_TIMEOUT_MS', 60_000, 1),
    turnTimeoutMs: integer(env, 'AGENT_TURN_TIMEOUT_MS', 600_000, 0),
    approvalTimeoutMs: integer(env, 'AGENT_APPROVAL_TIMEOUT_MS', 600_000, 1),
    dbTimeoutMs: integer(env, 'AGENT_DB_TIMEOUT_MS', 10_000, 1),
  };
}

/** Distributed mode's settings, when `REDIS_URL` is set: it needs PostgreSQL (`AGENT_DB`). */
function distribution(
  env: NodeJS.ProcessEnv,
  db: AppConfig['db'],
): AppConfig['distribution'] | undefined {
  // Checked whether or not REDIS_URL is set: a typo stops the start either way.
  const prefix = env.AGENT_QUEUE_PREFIX?.trim() || 'agent';
  if (!/^[\w.-]+$/.test(prefix)) {
    throw new ConfigError(`AGENT_QUEUE_PREFIX must be letters, digits, _ . or -, got "${prefix}"`);
  }
  const instanceId = env.AGENT_INSTANCE_ID?.trim();
  if (instanceId !== undefined && instanceId !== '' && !/^[\x21-\x7e]+$/.test(instanceId)) {
    throw new ConfigError('AGENT_INSTANCE_ID must be printable ASCII without spaces');
  }
  const leaseMs = integer(env, 'AGENT_LEASE_MS', 10_000, 300);
  const concurrency = integer(env, 'AGENT_CONCURRENCY', 64, 1);
  const runWhereReceived = flag(env, 'AGENT_RUN_WHERE_RECEIVED', true);
  const redis = env.REDIS_URL?.trim();
  if (!redis) return undefined;
  const redisUrl = url('REDIS_URL', redis, ['redis:', 'rediss:']);
  if (db.kind !== 'postgres') {
    throw new ConfigError(
      'REDIS_URL is set but AGENT_DB is a SQLite file: distributed mode keeps its durable record in PostgreSQL, so set AGENT_DB=postgres://... (or unset REDIS_URL to run in one process)',
    );
  }
  return {
    redisUrl,
    ...(instanceId ? { instanceId } : {}),
    leaseMs,
    concurrency,
    prefix,
    runWhereReceived,
  };
}

/** `LOG_FORMAT`: `text` (the default) or `json`. */
function logFormat(env: NodeJS.ProcessEnv): AppConfig['logFormat'] {
  const raw = env.LOG_FORMAT?.trim() || 'text';
  if (raw !== 'text' && raw !== 'json') {
    throw new ConfigError(`LOG_FORMAT must be text or json, got "${raw}"`);
  }
  return raw;
}

/** The service name traces carry unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` says. */
export const DEFAULT_SERVICE_NAME = 'nest-agent-orchestrator';

/**
 * Tracing, when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set
 * (and `OTEL_SDK_DISABLED` is not `true`): the endpoints must be http(s) URLs and the protocols
 * ones the exporter speaks. The SDK reads the other `OTEL_*` variables itself.
 */
function tracing(env: NodeJS.ProcessEnv): TracingSettings | undefined {
  const set = (name: string) => env[name]?.trim() || undefined;
  const endpoints = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];
  for (const name of endpoints) if (set(name)) url(name, set(name)!, ['http:', 'https:']);
  for (const name of ['OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL']) {
    const protocol = set(name);
    if (protocol && !['http/protobuf', 'http/json', 'grpc'].includes(protocol)) {
      throw new ConfigError(`${name} must be http/protobuf, http/json or grpc, got "${protocol}"`);
    }
  }
  if (!endpoints.some(set) || set('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const named = /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const serviceName = set('OTEL_SERVICE_NAME') ?? (named ? undefined : DEFAULT_SERVICE_NAME);
  return serviceName ? { serviceName } : {};
}

/** `AGENT_MCP_CONFIG`: the path of a `{ "mcpServers": { ... } }` file, read and checked now. */
function mcpServers(env: NodeJS.ProcessEnv): McpServersConfig | undefined {
  const path = env.AGENT_MCP_CONFIG?.trim();
  if (!path) return undefined;
  try {
    return readMcpConfigFile(path);
  } catch (error) {
    throw new ConfigError(`AGENT_MCP_CONFIG: ${(error as Error).message}`);
  }
}

/** Reads and validates the environment; throws `ConfigError` naming the bad variable. */
export function loadAppConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const host = env.HOST ?? '127.0.0.1';
  if (!host.trim()) throw new ConfigError('HOST must not be empty');
  if (!/^[\w.:%[\]-]+$/.test(host)) {
    throw new ConfigError(`HOST must be a host name or an IP address, got "${host}"`);
  }
  const token = env.AGENT_ADMIN_TOKEN;
  if (token !== undefined && token.length < 16) {
    throw new ConfigError('AGENT_ADMIN_TOKEN must be at least 16 characters long');
  }
  // It travels in an `Authorization: Bearer` header: visible ASCII only, no spaces.
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
    throw new ConfigError('AGENT_ADMIN_TOKEN must be printable ASCII without spaces');
  }
  const llmBase = env.LLM_BASE_URL?.trim();
  const db = env.AGENT_DB?.trim() || './data/agent.sqlite';
  // Checked whatever the database: a typo stops the start either way.
  const prepare = flag(env, 'AGENT_DB_PREPARE', true);
  const store: AppConfig['db'] = /^postgres(ql)?:/.test(db)
    ? { kind: 'postgres', url: url('AGENT_DB', db, ['postgres:', 'postgresql:']), prepare }
    : { kind: 'sqlite', file: db };
  return {
    port: port(env),
    host,
    adminToken: token ?? randomBytes(24).toString('base64url'),
    adminTokenGenerated: token === undefined,
    llm: llmBase
      ? {
          baseURL: url('LLM_BASE_URL', llmBase, ['http:', 'https:']),
          apiKey: env.LLM_API_KEY || undefined,
          model: env.LLM_MODEL || undefined,
        }
      : undefined,
    db: store,
    distribution: distribution(env, store),
    limits: limits(env),
    http: httpLimits(env),
    trustProxy: trustProxy(env),
    rateLimits: rateLimits(env),
    logFormat: logFormat(env),
    tracing: tracing(env),
    mcpServers: mcpServers(env),
  };
}

/** Injection token of the `AppConfig`. */
export const APP_CONFIG = Symbol.for('app:config');
