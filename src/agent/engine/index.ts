/** The engine's entry for the agent module. @internal */
export * from './input-gate';
export { closingMarkers } from './phases/bookkeeping';
export * from './ports';
export * from './turn-runner';
export * from './turn-scheduler';
