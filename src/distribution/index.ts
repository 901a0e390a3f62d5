export * from './hold-table';
export * from './in-process.dispatcher';
