export * from './deferred';
export * from './session-lane';
export * from './holds';
export * from './turn';
export * from './turn-deps';
export * from './turn-runner';
export * from './turn-scheduler';
export * from './input-gate';
