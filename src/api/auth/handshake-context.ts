import type { ExecutionContext, Type } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';

/** The handshake request as a host guard sees it: its headers, and the client's `auth`. */
export type HandshakeRequest = IncomingMessage & { auth?: unknown; user?: unknown };

/**
 * An HTTP execution context over a Socket.IO handshake, so that a host guard written for HTTP
 * requests (reading `headers`, setting `request.user`) authenticates sockets as it does
 * requests. `getResponse()` is `undefined`: a guard answers by returning or throwing.
 */
export function handshakeContext(request: HandshakeRequest, gateway: Type): ExecutionContext {
  const args = [request, undefined, undefined];
  const handler = function handshake() {};
  const unavailable = () => {
    throw new Error('A Socket.IO handshake is authenticated as an HTTP request');
  };
  return {
    getType: <T extends string = 'http'>() => 'http' as T,
    getClass: <T>() => gateway as Type<T>,
    getHandler: () => handler,
    getArgs: <T extends unknown[]>() => args as T,
    getArgByIndex: <T>(index: number) => args[index] as T,
    switchToHttp: () => ({
      getRequest: <T>() => request as T,
      getResponse: <T>() => undefined as T,
      getNext: <T>() => undefined as T,
    }),
    switchToRpc: unavailable,
    switchToWs: unavailable,
  };
}
