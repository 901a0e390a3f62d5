export * from './agent-tracing';
