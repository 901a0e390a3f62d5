import { Inject, Injectable } from '@nestjs/common';
import { getStorageToken, type ThrottlerStorage } from '@nestjs/throttler';
import type { RateLimit } from '../api.module-definition';

/** What one counted hit says. */
export interface RateVerdict {
  /** Whether the address is over the limit (refuse the request). */
  blocked: boolean;
  /** Seconds until the address may try again (at least 1 when blocked). */
  retryAfterSeconds: number;
}

/**
 * Fixed-window counts per client address for the doors the throttler guard does not cover
 * (wrong-token attempts, Socket.IO handshakes and events, the OpenAPI pages), kept in the same
 * storage as the guard's so that one process has one set of counters.
 */
@Injectable()
export class RateLimiter {
  constructor(@Inject(getStorageToken()) private readonly storage: ThrottlerStorage) {}

  /** Counts one hit of `address` at the door `bucket` against `limit`. */
  async hit(bucket: string, address: string | undefined, limit: RateLimit): Promise<RateVerdict> {
    const record = await this.storage.increment(
      `${bucket}:${address ?? 'unknown'}`,
      limit.ttlMs,
      limit.limit,
      limit.ttlMs,
      bucket,
    );
    return {
      blocked: record.isBlocked,
      retryAfterSeconds: Math.max(1, Math.ceil(record.timeToBlockExpire)),
    };
  }
}

/** The door names of {@link RateLimiter.hit}. */
export const RATE_BUCKETS = {
  /** Requests and handshakes with a wrong or missing admin token. */
  auth: 'auth',
  /** Socket.IO handshakes with the right token. */
  handshake: 'socket-handshake',
  /** Socket.IO events. */
  event: 'socket-event',
  /** The OpenAPI pages. */
  docs: 'docs',
} as const;
