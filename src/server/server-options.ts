import { compile } from 'proxy-addr';

/**
 * Which proxies in front of the server to believe about the client's address (their
 * `X-Forwarded-For`), for the per-address rate limits of REST and Socket.IO: `false` none (the
 * address is the connection's), a number of proxies (hops) in front, or the proxies' addresses,
 * subnets (CIDR) or the names `loopback`, `linklocal`, `uniquelocal`, as Express's
 * `trust proxy` setting takes them.
 */
export type TrustProxy = false | number | string[];

/** Why `value` is no valid {@link TrustProxy}, or `undefined` when it is one. */
export function trustProxyProblem(value: TrustProxy): string | undefined {
  if (value === false) return undefined;
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && value >= 1
      ? undefined
      : 'a number of proxies of at least 1';
  }
  if (!Array.isArray(value) || value.length === 0) return 'false, a number, or a list of addresses';
  try {
    compile(value);
    return undefined;
  } catch (error) {
    return `a list of addresses, subnets or loopback / linklocal / uniquelocal (${(error as Error).message})`;
  }
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

/** What only the server has: its HTTP server's limits and its shutdown. */
export interface ServerOptions {
  http?: HttpLimits;
  /** Proxies whose `X-Forwarded-For` names the client (see {@link TrustProxy}). @default false */
  trustProxy?: TrustProxy;
  /**
   * Milliseconds the shutdown waits for open HTTP requests (a `?wait=true` answer, say) to
   * finish after the agent has drained. @default 15000
   */
  shutdownGraceMs?: number;
}

/** Server options with defaults applied. */
export interface ResolvedServerOptions {
  http: Required<HttpLimits>;
  trustProxy: TrustProxy;
  shutdownGraceMs: number;
}

/** Injection token of the server's {@link ResolvedServerOptions}. */
export const SERVER_OPTIONS = Symbol.for('agent-server:options');

/** Defaults of {@link ServerOptions}. */
export const SERVER_OPTION_DEFAULTS = {
  http: {
    headersTimeoutMs: 30_000,
    requestTimeoutMs: 60_000,
    keepAliveTimeoutMs: 5_000,
    maxConnections: 1024,
  },
  shutdownGraceMs: 15_000,
} as const;

/** An invalid server option; the message names it. */
export class ServerOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerOptionsError';
  }
}

function positiveInteger(name: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1) {
    throw new ServerOptionsError(`Server ${name} must be a positive integer`);
  }
  return value as number;
}

/** Applies defaults and validates; throws `ServerOptionsError` naming the bad option. */
export function resolveServerOptions(options: ServerOptions = {}): ResolvedServerOptions {
  const value = { ...SERVER_OPTION_DEFAULTS.http, ...options.http };
  const http = Object.fromEntries(
    Object.entries(value).map(([key, v]) => [key, positiveInteger(`http.${key}`, v)]),
  ) as Required<HttpLimits>;
  // Node refuses this combination at server creation; say so here, by name.
  if (http.headersTimeoutMs > http.requestTimeoutMs) {
    throw new ServerOptionsError('Server http.headersTimeoutMs must not exceed requestTimeoutMs');
  }
  const grace = options.shutdownGraceMs ?? SERVER_OPTION_DEFAULTS.shutdownGraceMs;
  if (!Number.isFinite(grace) || grace < 0) {
    throw new ServerOptionsError('Server shutdownGraceMs must be a non-negative number');
  }
  const trustProxy = options.trustProxy ?? false;
  const problem = trustProxyProblem(trustProxy);
  if (problem) throw new ServerOptionsError(`Server trustProxy must be ${problem}`);
  return { http, shutdownGraceMs: grace, trustProxy };
}
