export * from './health.controller';
export * from './http-limits';
export * from './http-shutdown';
export * from './metrics.controller';
export * from './request-pacer';
export * from './server-options';
export * from './server.setup';
export * from './tracing-sdk';
