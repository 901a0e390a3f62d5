export * from './hold-table';
export * from './in-process.dispatcher';
export * from './distribution-options';
export * from './distribution-health';
export { LeaseFencing } from './redis/lease-fencing';
export { RedisSettingsError } from './redis/redis-settings';
export * from './wake-wiring';
export type { WakeQueue } from './redis/wake-queue';
// Type-only use of ioredis: importing it loads no Redis client.
export { RedisUnavailableError } from './redis/redis-health';
export * from './event-relay';
