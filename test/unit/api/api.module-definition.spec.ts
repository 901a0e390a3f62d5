import { ApiOptionsError, resolveApiOptions } from '../../../src/api';

const adminToken = 'a-token-of-16-chars!';

describe('resolveApiOptions', () => {
  it('defaults: 2 MB body limit in bytes, the three rate limits, the HTTP limits', () => {
    expect(resolveApiOptions({ adminToken })).toEqual({
      adminToken,
      bodyLimit: 2 * 1024 * 1024,
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
    });
  });

  it.each([
    ['16kb', 16 * 1024],
    ['1.5MB', 1.5 * 1024 * 1024],
    ['1000', 1000],
    [4096, 4096],
  ])('bodyLimit %j: %d bytes', (bodyLimit, bytes) => {
    expect(resolveApiOptions({ adminToken, bodyLimit }).bodyLimit).toBe(bytes);
  });

  it.each([
    [{ bodyLimit: 'lots' }, /bodyLimit/],
    [{ bodyLimit: 0 }, /bodyLimit/],
    [{ http: { maxConnections: 0 } }, /http\.maxConnections/],
    [{ http: { requestTimeoutMs: 1.5 } }, /http\.requestTimeoutMs/],
    [{ http: { headersTimeoutMs: 2000, requestTimeoutMs: 1000 } }, /headersTimeoutMs/],
    [{ rateLimits: { auth: { limit: 0, ttlMs: 1 } } }, /rateLimits\.auth\.limit/],
  ])('%j: refused naming the option', (options, name) => {
    expect(() => resolveApiOptions({ adminToken, ...options })).toThrow(ApiOptionsError);
    expect(() => resolveApiOptions({ adminToken, ...options })).toThrow(name);
  });
});
