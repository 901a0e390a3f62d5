export * from './messages';
export * from './metadata-keys';
export * from './llm';
export * from './tools';
export * from './approvals';
export * from './turn';
export * from './usage';
export * from './ports';
export * from './hooks';
export * from './events';
export * from './errors';
export * from './dispatch';
export * from './text-policy';
export * from './log-escape';
export * from './ids';
export * from './trace-context';
export * from './iso-time';
export * from './thenable';

// Names a turn reaches many times, re-exported by name as well. A name re-exported only by
// `export *` is read through one getter that the compiled helper shares among every name (a
// megamorphic load on each call); a name re-exported by name has a getter of its own.
export { normaliseDeep, normaliseText } from './text-policy';
export { newId } from './ids';
export { isoNow, isoTime } from './iso-time';
export { isThenable } from './thenable';
export { CONTROL_KINDS, conversationTail, isControlKind } from './messages';
export { CONTRIBUTION_BUCKETS, USAGE_BUCKETS } from './usage';
export { escapeForLog } from './log-escape';
