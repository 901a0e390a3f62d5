export * from './hold-table';
export * from './in-process.dispatcher';
export * from './distribution-options';
export * from './distribution-health';
export { LeaseFencing } from './redis/lease-fencing';
export { RedisSettingsError } from './redis/redis-settings';
// Type-only use of ioredis: importing it loads no Redis client.
export { RedisUnavailableError } from './redis/redis-health';
