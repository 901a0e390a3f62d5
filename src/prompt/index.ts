export * from './prompt.types';
export * from './prompt-contribution.decorator';
export * from './prompt.assembler';
export * from './history-window';
export * from './context-trimmer';

// Re-exported by name as well, for the turn's hot calls (see `src/contracts/index.ts`).
export { TURN_INPUT_FLAG } from './prompt.assembler';
export { historyForModel, historyToModelMessages, speakerContent } from './history-window';
export { dropHistorySegments, trimToBudget } from './context-trimmer';
