export * from './compose';
export * from './hook.registry';
export * from './hook-timing';
export * from './agent-hook.decorator';
