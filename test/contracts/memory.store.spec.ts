import { MemoryMessageLog, MemorySessionStore } from '../../src';
import { describeHistoryContract } from './store-contract';

describeHistoryContract('memory', async () => {
  // One log serves both ports, as AgentModule binds it by default.
  const log = new MemoryMessageLog();
  return {
    history: log,
    archive: log,
    sessions: new MemorySessionStore(),
    cleanup: async () => undefined,
  };
});
