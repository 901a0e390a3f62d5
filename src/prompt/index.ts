export * from './prompt.types';
export * from './prompt-contribution.decorator';
export * from './prompt.assembler';
export * from './history-window';
export * from './context-trimmer';
