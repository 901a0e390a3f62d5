export * from './agent.module';
export * from './agent.module-definition';
export * from './agent.options';
export * from './agent.options.validate';
export * from './agent.service';
export * from './agent-event.bus';
export * from './instrumentation';
export * from './tools';
export { decodeSessionCursor, SESSION_PAGE, SESSION_STATES } from './session-cursor';
