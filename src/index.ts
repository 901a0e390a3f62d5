/**
 * The library's public surface (interface.md section 1). The server's composition root
 * (`AppModule`) lives in `app.module.ts` and is not re-exported here.
 */
export * from './contracts';
export * from './hooks';
export * from './prompt';
export * from './usage';
export * from './session-bridge';
export * from './llm';
export * from './agent';
