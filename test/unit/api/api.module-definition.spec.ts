import { ApiOptionsError, resolveApiOptions, resolveApiShape } from '../../../src/api';
import { resolveServerOptions, ServerOptionsError } from '../../../src/server';

const adminToken = 'a-token-of-16-chars!';

describe('resolveApiOptions', () => {
  it('defaults: 2 MB body limit in bytes, the three rate limits', () => {
    expect(resolveApiOptions({ adminToken })).toEqual({
      adminToken,
      bodyLimit: 2 * 1024 * 1024,
      rateLimits: {
        public: { limit: 120, ttlMs: 60_000 },
        admin: { limit: 1200, ttlMs: 60_000 },
        auth: { limit: 20, ttlMs: 60_000 },
      },
      metricsRegistry: undefined,
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
    [{ rateLimits: { auth: { limit: 0, ttlMs: 1 } } }, /rateLimits\.auth\.limit/],
    [{ adminToken: 'short' }, /adminToken/],
  ])('%j: refused naming the option', (options, name) => {
    expect(() => resolveApiOptions({ adminToken, ...options })).toThrow(ApiOptionsError);
    expect(() => resolveApiOptions({ adminToken, ...options })).toThrow(name);
  });

  it('a token is required unless a host guard authenticates', () => {
    expect(() => resolveApiOptions({})).toThrow(/adminToken/);
    expect(resolveApiOptions({}, true).adminToken).toBeUndefined();
    // A token given beside a host guard must still be a proper one.
    expect(() => resolveApiOptions({ adminToken: 'short' }, true)).toThrow(/adminToken/);
  });
});

describe('resolveApiShape', () => {
  it("defaults: routes under 'agent', namespace '/agent', the dashboard at the routes' path", () => {
    expect(resolveApiShape({})).toEqual({
      path: 'agent',
      namespace: '/agent',
      dashboard: 'agent',
      authGuard: undefined,
    });
  });

  it('paths lose their slashes; the dashboard may have its own path or none', () => {
    expect(resolveApiShape({ path: '/api/agent/' }).path).toBe('api/agent');
    expect(resolveApiShape({ dashboard: { path: '/' } }).dashboard).toBe('');
    expect(resolveApiShape({ path: 'x', dashboard: {} }).dashboard).toBe('x');
    expect(resolveApiShape({ dashboard: false }).dashboard).toBe(false);
  });

  it.each([
    [{ path: 'has space' }, /path/],
    [{ path: 3 as unknown as string }, /path/],
    [{ namespace: 'agent' }, /namespace/],
    [{ dashboard: 'yes' as unknown as boolean }, /dashboard/],
    [{ authGuard: {} as never }, /authGuard/],
  ])('%j: refused naming the option', (extras, name) => {
    expect(() => resolveApiShape(extras)).toThrow(ApiOptionsError);
    expect(() => resolveApiShape(extras)).toThrow(name);
  });
});

describe('resolveServerOptions', () => {
  it('defaults: the HTTP limits, a 15 s shutdown grace and no trusted proxy', () => {
    expect(resolveServerOptions()).toEqual({
      http: {
        headersTimeoutMs: 30_000,
        requestTimeoutMs: 60_000,
        keepAliveTimeoutMs: 5_000,
        maxConnections: 1024,
      },
      shutdownGraceMs: 15_000,
      trustProxy: false,
    });
  });

  it.each([[1], [['loopback']], [['10.0.0.0/8', '127.0.0.1']]])(
    'trustProxy %j: kept as given',
    (trustProxy) => {
      expect(resolveServerOptions({ trustProxy }).trustProxy).toEqual(trustProxy);
    },
  );

  it.each([
    [{ http: { maxConnections: 0 } }, /http\.maxConnections/],
    [{ http: { requestTimeoutMs: 1.5 } }, /http\.requestTimeoutMs/],
    [{ http: { headersTimeoutMs: 2000, requestTimeoutMs: 1000 } }, /headersTimeoutMs/],
    [{ shutdownGraceMs: -1 }, /shutdownGraceMs/],
    [{ trustProxy: 0 }, /trustProxy/],
    [{ trustProxy: [] }, /trustProxy/],
    [{ trustProxy: ['not an address'] }, /trustProxy/],
  ])('%j: refused naming the option', (options, name) => {
    expect(() => resolveServerOptions(options)).toThrow(ServerOptionsError);
    expect(() => resolveServerOptions(options)).toThrow(name);
  });
});
