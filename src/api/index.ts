export * from './health/health.controller';
