export * from './memory/memory-session.store';
export * from './memory/memory-message.log';
export * from './sql/schema';
export * from './sql/migrations';
export * from './sql/sql-message.log';
export * from './sql/sql-session.store';
export * from './sql/open-database';
