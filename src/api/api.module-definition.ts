import { ConfigurableModuleBuilder } from '@nestjs/common';
import { byteSizeOf } from './http/byte-size';

/** A fixed-window rate limit per client address. */
export interface RateLimit {
  /** Requests allowed per window. */
  limit: number;
  /** Window length in milliseconds. */
  ttlMs: number;
}

/** Limits of the HTTP server itself (Node's `http.Server` settings). */
export interface HttpLimits {
  /** Longest wait for a request's headers, in milliseconds. @default 30000 */
  headersTimeoutMs?: number;
  /**
   * Longest wait for a whole request (headers and body), in milliseconds: a client that sends
   * an incomplete body is answered 408 and closed then, instead of holding the connection for
   * Node's default 300 s. The answer itself may take longer (a `?wait=true` turn). @default 60000
   */
  requestTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open, in milliseconds. @default 5000 */
  keepAliveTimeoutMs?: number;
  /** Most open connections (HTTP and Socket.IO together); beyond it new ones are closed. @default 1024 */
  maxConnections?: number;
}

/** Options of `ApiModule.forRoot` / `forRootAsync`. */
export interface ApiModuleOptions {
  /**
   * Bearer token of the admin REST routes and of the Socket.IO handshake (at least 16
   * characters). Compared in constant time.
   */
  adminToken: string;
  /**
   * Largest accepted JSON body (bytes, or a `bytes` string such as `'2mb'`); also the largest
   * Socket.IO event payload. @default '2mb'
   */
  bodyLimit?: number | string;
  /**
   * Rate limits per client address. `public`: `/health`, `/metrics`, `/docs`; `admin`: the
   * `/agent` routes with the right token, Socket.IO handshakes with it and Socket.IO events;
   * `auth`: requests and handshakes with a wrong or missing token (past it they get 429; the
   * right token is never held by it). @default public 120, admin 1200, auth 20 per minute
   */
  rateLimits?: { public?: RateLimit; admin?: RateLimit; auth?: RateLimit };
  /** Timeouts and the connection cap of the HTTP server (applied by `setupApi`). */
  http?: HttpLimits;
  /**
   * Milliseconds the shutdown waits for open HTTP requests (a `?wait=true` answer, say) to
   * finish after the agent has drained. @default 15000
   */
  shutdownGraceMs?: number;
}

/** Options with defaults applied. */
export interface ResolvedApiOptions {
  adminToken: string;
  /** `bodyLimit` in bytes. */
  bodyLimit: number;
  rateLimits: { public: RateLimit; admin: RateLimit; auth: RateLimit };
  http: Required<HttpLimits>;
  shutdownGraceMs: number;
}

/** Defaults of {@link ApiModuleOptions}. */
export const API_OPTION_DEFAULTS = {
  bodyLimit: '2mb',
  rateLimits: {
    public: { limit: 120, ttlMs: 60_000 },
    admin: { limit: 1200, ttlMs: 60_000 },
    auth: { limit: 20, ttlMs: 60_000 },
  },
  http: {
    headersTimeoutMs: 30_000,
    requestTimeoutMs: 60_000,
    keepAliveTimeoutMs: 5_000,
    maxConnections: 1024,
  },
  shutdownGraceMs: 15_000,
} as const;

/** Names of the two throttlers (`@nestjs/throttler`). */
export const THROTTLERS = { public: 'public', admin: 'admin' } as const;

export const {
  ConfigurableModuleClass: ApiConfigurableModule,
  MODULE_OPTIONS_TOKEN: API_MODULE_OPTIONS,
  OPTIONS_TYPE: API_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: API_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<ApiModuleOptions>({ moduleName: 'Api' })
  .setClassMethodName('forRoot')
  .build();

/** Injection token of the options with defaults applied. */
export const API_OPTIONS = Symbol.for('api:resolved_options');

/** An invalid `ApiModule` option; the message names the option. */
export class ApiOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiOptionsError';
  }
}

function positiveInteger(name: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1) {
    throw new ApiOptionsError(`ApiModule ${name} must be a positive integer`);
  }
  return value as number;
}

function rateLimit(name: string, given: RateLimit | undefined, fallback: RateLimit): RateLimit {
  const value = given ?? fallback;
  return {
    limit: positiveInteger(`rateLimits.${name}.limit`, value.limit),
    ttlMs: positiveInteger(`rateLimits.${name}.ttlMs`, value.ttlMs),
  };
}

function httpLimits(given: HttpLimits = {}): Required<HttpLimits> {
  const value = { ...API_OPTION_DEFAULTS.http, ...given };
  const limits = Object.fromEntries(
    Object.entries(value).map(([key, v]) => [key, positiveInteger(`http.${key}`, v)]),
  ) as Required<HttpLimits>;
  // Node refuses this combination at server creation; say so here, by name.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ApiOptionsError('ApiModule http.headersTimeoutMs must not exceed requestTimeoutMs');
  }
  return limits;
}

function bodyLimit(value: number | string): number {
  const bytes = byteSizeOf(value);
  if (bytes === undefined) {
    throw new ApiOptionsError(
      `ApiModule bodyLimit must be a positive number of bytes or a size such as '2mb', got ${JSON.stringify(value)}`,
    );
  }
  return bytes;
}

/** Applies defaults and validates; throws `ApiOptionsError` naming the bad option. */
export function resolveApiOptions(options: ApiModuleOptions): ResolvedApiOptions {
  if (typeof options?.adminToken !== 'string' || options.adminToken.length < 16) {
    throw new ApiOptionsError('ApiModule adminToken must be a string of at least 16 characters');
  }
  const grace = options.shutdownGraceMs ?? API_OPTION_DEFAULTS.shutdownGraceMs;
  if (!Number.isFinite(grace) || grace < 0) {
    throw new ApiOptionsError('ApiModule shutdownGraceMs must be a non-negative number');
  }
  const defaults = API_OPTION_DEFAULTS.rateLimits;
  const given = options.rateLimits;
  return {
    adminToken: options.adminToken,
    bodyLimit: bodyLimit(options.bodyLimit ?? API_OPTION_DEFAULTS.bodyLimit),
    rateLimits: {
      public: rateLimit('public', given?.public, defaults.public),
      admin: rateLimit('admin', given?.admin, defaults.admin),
      auth: rateLimit('auth', given?.auth, defaults.auth),
    },
    http: httpLimits(options.http),
    shutdownGraceMs: grace,
  };
}
