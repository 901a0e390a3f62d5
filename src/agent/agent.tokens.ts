/** Injection token of the turn dependencies bundle. @internal */
export const AGENT_TURN_DEPS = Symbol.for('agent:turn_deps');
