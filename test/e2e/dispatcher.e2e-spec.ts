import {
  InProcessDispatcher,
  SessionLanesFactory,
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
          inject: [SessionLanesFactory],
          useFactory: (lanes: SessionLanesFactory) => {
            const local = new InProcessDispatcher(lanes);
            return Object.assign(Object.create(local) as InProcessDispatcher, {
              submit: async (message: IncomingMessage) => {
                // Serialise both ways, as a transport to another instance would.
                const entry: (typeof crossed)[number] = {
                  message: JSON.parse(JSON.stringify(message)),
                };
                crossed.push(entry);
                const admission = await local.submit(entry.message);
                if (!admission.accepted) return admission;
                const settlement = admission.settlement.then(
                  (settled) => (entry.settlement = structuredClone(settled)),
                );
                return { accepted: true, settlement };
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
        message: { id: expect.any(String), sessionId: 's', content: 'hi', userId: 'u' },
        settlement: settled,
      },
    ]);
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    expect(h.agent.abort('s')).toBe(false);
    expect(aborts).toEqual(['s']);
  });
});
