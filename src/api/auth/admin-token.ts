import { createHash, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { Actor } from '../../contracts';
import { API_OPTIONS, type ResolvedApiOptions } from '../api.module-definition';

/** Who the admin token authenticates: `by` of the aborts it makes. */
export const ADMIN_CALLER: Readonly<Actor> = Object.freeze({ platform: 'admin', userId: 'admin' });

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** `Bearer <token>` -> token; anything else -> undefined. */
export function bearerTokenOf(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/**
 * Checks candidate tokens against the admin token in constant time: both sides are hashed to
 * equal-length digests first, so neither the content nor the length of the token leaks.
 */
@Injectable()
export class AdminTokenVerifier {
  private readonly expected?: Buffer;

  constructor(@Inject(API_OPTIONS) options: ResolvedApiOptions) {
    // No token (a host guard authenticates instead): no candidate is ever the admin token.
    this.expected = options.adminToken === undefined ? undefined : digest(options.adminToken);
  }

  /** The caller the token authenticates, or `undefined` when it is not the admin token. */
  verify(candidate: unknown): Actor | undefined {
    if (!this.expected) return undefined;
    const given = digest(typeof candidate === 'string' ? candidate : '');
    const equal = timingSafeEqual(given, this.expected);
    return equal && typeof candidate === 'string' ? { ...ADMIN_CALLER } : undefined;
  }
}
