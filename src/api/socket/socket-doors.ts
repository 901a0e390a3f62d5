import { HttpException, Inject, Injectable, Optional, type CanActivate } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import proxyAddr from 'proxy-addr';
import type { Socket } from 'socket.io';
import type { Actor } from '../../contracts';
import {
  API_OPTIONS,
  API_SHAPE,
  type ResolvedApiOptions,
  type ResolvedApiShape,
} from '../api.module-definition';
import { API_AUTH_GUARD } from '../auth/agent-api.guard';
import { AdminTokenVerifier, bearerTokenOf } from '../auth/admin-token';
import { callerOf } from '../auth/auth.decorators';
import { handshakeContext, type HandshakeRequest } from '../auth/handshake-context';
import { bodyOf, type ErrorBody } from '../http/api-error';
import { RATE_BUCKETS, RateLimiter, type RateVerdict } from '../http/rate-limiter';
import { shapeProblem } from '../http/validation';

/** A handshake refusal: the client's `connect_error` carries the message and `data`. */
type HandshakeError = Error & { data: ErrorBody };

/** Socket.IO's `next` of a middleware. */
type Next = (error?: Error) => void;

const tooMany = (verdict: RateVerdict): ErrorBody => ({
  ...bodyOf(429, `Too many requests, slow down: retry in ${verdict.retryAfterSeconds} s`),
  retryAfter: verdict.retryAfterSeconds,
});

/** Express's compiled `trust proxy` setting (`app.get('trust proxy fn')`). */
type TrustFn = (address: string, hop: number) => boolean;

function refused(body: ErrorBody): HandshakeError {
  return Object.assign(new Error(body.message), { data: body });
}

/**
 * The size of an event's payload as the client encoded it (JSON), in bytes; `undefined` when
 * its shape is refused anyway (too deep or too many values: validation answers 400), since
 * measuring such a payload is what the shape check exists to avoid.
 */
function payloadBytes(args: unknown[]): number | undefined {
  let bytes = 0;
  for (const arg of args) {
    if (shapeProblem(arg)) return undefined;
    bytes += Buffer.byteLength(JSON.stringify(arg) ?? '');
  }
  return bytes;
}

/**
 * The limits of the Socket.IO doors, per client address as on REST (README.md, "Socket.IO"):
 * the handshake needs the admin token (a wrong one counts against the `auth` limit, the right
 * one against the `admin` limit, so guessing never locks the operator out), every event counts
 * against the `admin` limit, and an event payload over the body limit is refused with a 413
 * ack while the connection stays open. A refused event is never handled.
 */
@Injectable()
export class SocketDoors {
  constructor(
    private readonly tokens: AdminTokenVerifier,
    private readonly limiter: RateLimiter,
    @Inject(API_OPTIONS) private readonly options: ResolvedApiOptions,
    @Inject(API_SHAPE) private readonly shape: ResolvedApiShape,
    @Inject(API_AUTH_GUARD) private readonly guard: CanActivate,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {}

  /**
   * The client's address as REST sees it (`req.ip`): behind proxies the application trusts
   * (Express's `trust proxy`, the server's `TRUST_PROXY`), the address they forwarded;
   * otherwise the connection's.
   */
  addressOf(socket: Socket): string {
    const express = this.adapterHost?.httpAdapter?.getInstance<
      { get?: (name: string) => unknown } | undefined
    >();
    const trust = typeof express?.get === 'function' ? express.get('trust proxy fn') : undefined;
    if (typeof trust !== 'function') return socket.handshake.address;
    return proxyAddr(socket.request, trust as TrustFn);
  }

  /** Namespace middleware: authenticates and rate-limits the handshake. */
  handshake(): (socket: Socket, next: Next) => void {
    return (socket, next) => {
      this.admit(socket).then(
        (caller) => {
          (socket.data as { caller?: Actor }).caller = caller;
          next();
        },
        (error: Error) => next(error),
      );
    };
  }

  /**
   * Socket middleware: refuses an event over the rate limit (429) or the payload limit (413)
   * with an error ack. Events pass in arrival order, whatever the limiter's storage.
   */
  events(socket: Socket): (packet: unknown[], next: Next) => void {
    let previous = Promise.resolve();
    return (packet, next) => {
      const last = packet[packet.length - 1];
      const ack = typeof last === 'function' ? (last as (answer: ErrorBody) => void) : undefined;
      const args = packet.slice(1, ack ? -1 : undefined);
      previous = previous
        .then(() => this.refusalOf(this.clientAddress(socket), args))
        .then(
          (refusal) => (refusal ? ack?.(refusal) : next()),
          (error: Error) => next(error),
        )
        // `next` runs the handlers, which ack their own failures; the chain must outlive them.
        .catch(() => undefined);
    };
  }

  /**
   * The caller of a handshake: the admin token's, or (with a host guard) whom the host guard
   * admits; `null` when refused.
   */
  private async callerOf(socket: Socket): Promise<Actor | undefined | null> {
    const { auth, headers } = socket.handshake;
    if (!this.shape.authGuard) {
      const given = (auth as { token?: unknown } | undefined)?.token;
      return this.tokens.verify(given ?? bearerTokenOf(headers.authorization)) ?? null;
    }
    const request = Object.assign(socket.request, { auth }) as HandshakeRequest;
    try {
      const admitted = await this.guard.canActivate(handshakeContext(request, SocketDoors));
      return admitted === true ? callerOf(request) : null;
    } catch (error) {
      if (error instanceof HttpException && error.getStatus() < 500) return null;
      throw error;
    }
  }

  /** The address the handshake counted against (see `addressOf`), kept with the socket. */
  private clientAddress(socket: Socket): string {
    const data = socket.data as { address?: string };
    return (data.address ??= this.addressOf(socket));
  }

  private async admit(socket: Socket): Promise<Actor | undefined> {
    const address = this.clientAddress(socket);
    const found = await this.callerOf(socket);
    const caller = found === null ? undefined : found;
    const admitted = found !== null;
    const { rateLimits } = this.options;
    const bucket = admitted ? RATE_BUCKETS.handshake : RATE_BUCKETS.auth;
    const verdict = await this.limiter.hit(
      bucket,
      address,
      admitted ? rateLimits.admin : rateLimits.auth,
    );
    if (verdict.blocked) throw refused(tooMany(verdict));
    if (!admitted) {
      const needs = this.shape.authGuard
        ? 'the host guard refused it'
        : 'a valid admin token is required in auth.token';
      throw refused(bodyOf(401, `Unauthorized: ${needs}`));
    }
    return caller;
  }

  private async refusalOf(address: string, args: unknown[]): Promise<ErrorBody | undefined> {
    const verdict = await this.limiter.hit(
      RATE_BUCKETS.event,
      address,
      this.options.rateLimits.admin,
    );
    if (verdict.blocked) return tooMany(verdict);
    const bytes = payloadBytes(args);
    if (bytes !== undefined && bytes > this.options.bodyLimit) {
      return bodyOf(413, `The payload is larger than the limit of ${this.options.bodyLimit} bytes`);
    }
    return undefined;
  }
}
