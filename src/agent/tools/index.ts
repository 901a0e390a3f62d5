export * from './agent-tool.decorator';
export * from './tool.registry';
