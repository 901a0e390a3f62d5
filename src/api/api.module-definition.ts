import { ConfigurableModuleBuilder, type CanActivate, type Type } from '@nestjs/common';
import type { Registry } from 'prom-client';
import { byteSizeOf } from './http/byte-size';

/** A fixed-window rate limit per client address. */
export interface RateLimit {
  /** Requests allowed per window. */
  limit: number;
  /** Window length in milliseconds. */
  ttlMs: number;
}

/**
 * Options of `AgentApiModule.forRoot` / `forRootAsync` (for `forRootAsync`, what its
 * `useFactory` answers). The module's shape (`path`, `namespace`, `dashboard`, `authGuard`) is
 * in {@link AgentApiModuleExtras}.
 */
export interface AgentApiModuleOptions {
  /**
   * Bearer token of the REST routes and of the Socket.IO handshake (at least 16 characters),
   * compared in constant time. Required unless an `authGuard` replaces the token check.
   */
  adminToken?: string;
  /**
   * Largest accepted JSON body of the module's routes (bytes, or a `bytes` string such as
   * `'2mb'`); also the largest Socket.IO event payload. A host whose own JSON body parser runs
   * first (Nest's default, 100 kB) keeps its own limit for these routes. @default '2mb'
   */
  bodyLimit?: number | string;
  /**
   * Rate limits per client address. `admin`: the module's routes with an accepted caller,
   * Socket.IO handshakes and events; `auth`: requests and handshakes with a wrong or missing
   * token (past it they get 429; the right token is never held by it); `public`: the server's
   * `/metrics` and `/docs` (unused by the module itself).
   * @default public 120, admin 1200, auth 20 per minute
   */
  rateLimits?: { public?: RateLimit; admin?: RateLimit; auth?: RateLimit };
  /**
   * The `prom-client` registry the agent's metrics are registered on (the host's, so its own
   * `/metrics` shows them). @default a registry of the module's own, see `AgentMetrics.registry`
   */
  metricsRegistry?: Registry;
}

/** Where the dashboard is served. */
export interface DashboardMount {
  /** Route of the page, relative to the application's global prefix. @default the module's `path` */
  path?: string;
}

/**
 * The module's shape, fixed when it is imported (top-level fields of the `forRoot` and
 * `forRootAsync` arguments, not of the factory's answer).
 */
export interface AgentApiModuleExtras {
  /** Route prefix of the REST controllers (`<path>/messages`, `<path>/sessions`). @default 'agent' */
  path?: string;
  /** Socket.IO namespace of the gateway. @default '/agent' */
  namespace?: string;
  /** Serve the operators' dashboard: at `path`, or where `{ path }` says; `false`: not at all. @default true */
  dashboard?: boolean | DashboardMount;
  /**
   * A guard of the host's that replaces the admin-token check on the module's routes and on the
   * Socket.IO handshake (there it sees the handshake request: `switchToHttp().getRequest()` has
   * its `headers` and `auth`). It is instantiated in the module, so its dependencies must be
   * resolvable there (global providers, or the module's own). The caller (`by` of aborts) is
   * `request.caller` (`{ platform, userId }`) if the guard sets it, else taken from
   * `request.user` (`id`, `sub`, `userId` or `username`).
   */
  authGuard?: Type<CanActivate>;
}

/** Defaults of {@link AgentApiModuleExtras}. */
export const API_EXTRA_DEFAULTS: Required<Omit<AgentApiModuleExtras, 'authGuard'>> &
  Pick<AgentApiModuleExtras, 'authGuard'> = {
  path: 'agent',
  namespace: '/agent',
  dashboard: true,
  authGuard: undefined,
};

/** Options with defaults applied. */
export interface ResolvedApiOptions {
  /** `undefined` when a host guard authenticates. */
  adminToken?: string;
  /** `bodyLimit` in bytes. */
  bodyLimit: number;
  rateLimits: { public: RateLimit; admin: RateLimit; auth: RateLimit };
  metricsRegistry?: Registry;
}

/** The module's shape with defaults applied. */
export interface ResolvedApiShape {
  /** Route prefix without leading or trailing slash (`''`: at the root). */
  path: string;
  namespace: string;
  /** Route of the dashboard page without slashes, or `false`. */
  dashboard: string | false;
  authGuard?: Type<CanActivate>;
}

/** Defaults of {@link AgentApiModuleOptions}. */
export const API_OPTION_DEFAULTS = {
  bodyLimit: '2mb',
  rateLimits: {
    public: { limit: 120, ttlMs: 60_000 },
    admin: { limit: 1200, ttlMs: 60_000 },
    auth: { limit: 20, ttlMs: 60_000 },
  },
} as const;

/** Names of the two throttlers (`@nestjs/throttler`). */
export const THROTTLERS = { public: 'public', admin: 'admin' } as const;

export const {
  ConfigurableModuleClass: ApiConfigurableModule,
  MODULE_OPTIONS_TOKEN: API_MODULE_OPTIONS,
  OPTIONS_TYPE: API_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: API_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<AgentApiModuleOptions>({ moduleName: 'AgentApi' })
  .setClassMethodName('forRoot')
  .setExtras<AgentApiModuleExtras>(API_EXTRA_DEFAULTS, (definition) => definition)
  .build();

/** Injection token of the options with defaults applied. */
export const API_OPTIONS = Symbol.for('agent-api:resolved_options');
/** Injection token of the module's shape ({@link ResolvedApiShape}). */
export const API_SHAPE = Symbol.for('agent-api:shape');

/** An invalid `AgentApiModule` option; the message names the option. */
export class ApiOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiOptionsError';
  }
}

function positiveInteger(name: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1) {
    throw new ApiOptionsError(`AgentApiModule ${name} must be a positive integer`);
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

function bodyLimit(value: number | string): number {
  const bytes = byteSizeOf(value);
  if (bytes === undefined) {
    throw new ApiOptionsError(
      `AgentApiModule bodyLimit must be a positive number of bytes or a size such as '2mb', got ${JSON.stringify(value)}`,
    );
  }
  return bytes;
}

/**
 * Applies defaults and validates; throws `ApiOptionsError` naming the bad option. `hostGuard`:
 * whether a host guard replaces the token (then `adminToken` may be left out).
 */
export function resolveApiOptions(
  options: AgentApiModuleOptions,
  hostGuard = false,
): ResolvedApiOptions {
  const token = options?.adminToken;
  const tokenMissing = token === undefined && hostGuard;
  if (!tokenMissing && (typeof token !== 'string' || token.length < 16)) {
    throw new ApiOptionsError(
      'AgentApiModule adminToken must be a string of at least 16 characters',
    );
  }
  const defaults = API_OPTION_DEFAULTS.rateLimits;
  const given = options.rateLimits;
  return {
    adminToken: token,
    bodyLimit: bodyLimit(options.bodyLimit ?? API_OPTION_DEFAULTS.bodyLimit),
    rateLimits: {
      public: rateLimit('public', given?.public, defaults.public),
      admin: rateLimit('admin', given?.admin, defaults.admin),
      auth: rateLimit('auth', given?.auth, defaults.auth),
    },
    metricsRegistry: options.metricsRegistry,
  };
}

/** A route without leading or trailing slashes; throws naming the option when not a string. */
function routeOf(name: string, value: unknown): string {
  if (typeof value !== 'string' || /[\s?#]/.test(value)) {
    throw new ApiOptionsError(`AgentApiModule ${name} must be a route path such as 'agent'`);
  }
  return value.replace(/^\/+|\/+$/g, '');
}

/** Applies defaults to the module's shape and validates it. */
export function resolveApiShape(extras: AgentApiModuleExtras): ResolvedApiShape {
  const path = routeOf('path', extras.path ?? API_EXTRA_DEFAULTS.path);
  const namespace = extras.namespace ?? API_EXTRA_DEFAULTS.namespace;
  if (typeof namespace !== 'string' || !/^\/[\w\-/.]*$/.test(namespace)) {
    throw new ApiOptionsError("AgentApiModule namespace must start with '/', such as '/agent'");
  }
  const mount = extras.dashboard ?? API_EXTRA_DEFAULTS.dashboard;
  let dashboard: string | false = false;
  if (mount === true) dashboard = path;
  else if (mount && typeof mount === 'object') {
    dashboard = routeOf('dashboard.path', mount.path ?? path);
  } else if (mount !== false) {
    throw new ApiOptionsError('AgentApiModule dashboard must be true, false or { path }');
  }
  if (extras.authGuard !== undefined && typeof extras.authGuard !== 'function') {
    throw new ApiOptionsError('AgentApiModule authGuard must be a guard class');
  }
  return { path, namespace, dashboard, authGuard: extras.authGuard };
}
