export * from './memory/memory-session.store';
export * from './memory/memory-message.log';
