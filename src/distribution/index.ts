export * from './hold-table';
export * from './in-process.dispatcher';
export * from './distribution-options';
export { LeaseFencing } from './redis/lease-fencing';
export { RedisSettingsError } from './redis/redis-settings';
export * from './wake-wiring';
export type { WakeQueue } from './redis/wake-queue';
