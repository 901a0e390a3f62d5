/**
 * Token accounting: the tiktoken estimator, the usage breakdown and the `token:usage` event
 * builder (contract U1-U7). Imports only from `../contracts` and packages.
 */
export * from './encoding';
export * from './token-estimator';
export * from './token-worker-pool';
export * from './usage-breakdown';
export * from './usage.tracker';
