/**
 * Token accounting: the token estimator, the usage breakdown and the `token:usage` event
 * builder (contract U1-U7). Imports only from `../contracts` and packages.
 */
export * from './encoding';
export * from './token-estimator';
export {
  MESSAGE_OVERHEAD,
  REPLY_PRIMING,
  TOOL_CALL_OVERHEAD,
  TOOL_DEFINITION_OVERHEAD,
  toolDefinitionJson,
  type TokenCounts,
} from './message-texts';
export * from './token-worker-pool';
export * from './usage-breakdown';
export * from './usage.tracker';
// Re-exported by name as well, for the turn's hot calls (see `src/contracts/index.ts`).
export { bucketMessages, classifyMessage, UsageBucketer } from './usage-breakdown';
