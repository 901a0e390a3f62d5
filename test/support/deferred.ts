/** The engine's `Deferred`, for specs that need a promise resolved from outside. */
export { Deferred } from '../../src/agent/engine/deferred';
