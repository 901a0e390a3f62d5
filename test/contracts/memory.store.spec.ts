import { MemoryMessageLog, MemorySessionStore } from '../../src';
import { MemoryInputInbox } from '../../src/session-bridge';
import { describeHistoryContract } from './store-contract';

describeHistoryContract('memory', async () => {
  // One log serves both ports, as AgentModule binds it by default.
  const log = new MemoryMessageLog();
  return {
    history: log,
    archive: log,
    sessions: new MemorySessionStore(),
    inbox: new MemoryInputInbox(),
    cleanup: async () => undefined,
  };
});
