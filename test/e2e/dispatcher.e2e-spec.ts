import {
  InProcessDispatcher,
  TurnScheduler,
  WorkDispatcher,
  type IncomingMessage,
  type Settlement,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

describe('WorkDispatcher seam', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  it('S1 / S3: inputs and settlements cross the dispatcher as plain data, and a host can bind its own', async () => {
    const crossed: { message: IncomingMessage; settlement?: Settlement }[] = [];
    const aborts: string[] = [];
    h = await AgentHarness.start({
      agent: {},
      extraProviders: [
        {
          provide: WorkDispatcher,
          inject: [TurnScheduler],
          useFactory: (scheduler: TurnScheduler) => {
            const local = new InProcessDispatcher(scheduler);
            return Object.assign(Object.create(local) as InProcessDispatcher, {
              submit: async (message: IncomingMessage) => {
                // Serialise both ways, as a transport to another instance would.
                const entry: (typeof crossed)[number] = {
                  message: JSON.parse(JSON.stringify(message)),
                };
                crossed.push(entry);
                const settlement = await local.submit(entry.message);
                entry.settlement = structuredClone(settlement);
                return entry.settlement;
              },
              abort: (sessionId: string, options: object) => {
                aborts.push(sessionId);
                return local.abort(sessionId, options);
              },
            });
          },
        },
      ],
    });
    h.server.enqueue({ text: 'hello' });
    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'hi', userId: 'u' });
    expect(crossed).toEqual([
      {
        message: { sessionId: 's', content: 'hi', userId: 'u' },
        settlement: settled,
      },
    ]);
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    expect(h.agent.abort('s')).toBe(false);
    expect(aborts).toEqual(['s']);
  });
});
