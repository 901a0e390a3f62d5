export * from './compose';
export * from './hook.registry';
export * from './agent-hook.decorator';
