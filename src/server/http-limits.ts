import type { Server } from 'node:http';
import type { HttpLimits } from './server-options';

/** Node checks request timeouts on a timer; at least this often, whatever the timeouts. */
const MAX_CHECK_INTERVAL_MS = 5_000;

/**
 * Sets the HTTP server's timeouts and connection cap (README.md, "Configuration (server)").
 * Call before `listen`: Node starts the timer that enforces `headersTimeout` and
 * `requestTimeout` when the server starts listening, reading `connectionsCheckingInterval`
 * then (its default, 30 s, would let an incomplete body hold a connection up to 30 s past its
 * timeout). `requestTimeout` bounds receiving the request only, never the time to answer it.
 */
export function applyHttpLimits(server: Server, limits: Required<HttpLimits>): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  const shortest = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval =
    Math.max(100, Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(shortest / 4)));
}
