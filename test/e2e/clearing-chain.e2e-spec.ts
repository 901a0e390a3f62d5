import { HookRegistry } from '../../src';
import { AgentHarness } from '../support/agent-harness';

describe('S4: clearing around a clear chain', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  it.each([
    ['before', -10],
    ['after', 10],
  ])(
    'S4: the stop and the hold happen whatever the order of the clear chain (a middleware registered %s the default)',
    async (_label, priority) => {
      h = await AgentHarness.start();
      const hooks = h.app.get(HookRegistry);
      const seen: { running?: string; waiting: number }[] = [];
      // Another party's middleware on the host's clear chain, registered at either end.
      hooks.use(
        'memory:clear',
        async (ctx: { sessionId: string }, next) => {
          seen.push({
            running: h.agent.runningTurn(ctx.sessionId),
            waiting: h.agent.waiting(ctx.sessionId).length,
          });
          await next();
        },
        { priority },
      );
      h.server.enqueue({ text: 'slow', hold: true });
      const running = h.agent.handleMessage({ sessionId: 's', content: 'first' });
      await h.server.nextRequest();
      const queued = h.agent.handleMessage({ sessionId: 's', content: 'second', source: 'cron' });
      await h.waitFor('agent:queue', (e) => e.waiting.length === 1);

      let during: Promise<unknown> | undefined;
      await h.agent.clearing(['s'], () =>
        hooks.run('memory:clear', { sessionId: 's' }, async () => {
          // An input arriving while the chain runs waits for the hold.
          during = h.agent.handleMessage({ sessionId: 's', content: 'during clear' });
          await h.history.clear('s');
        }),
      );
      expect(seen).toEqual([{ running: undefined, waiting: 0 }]);
      expect(await running).toMatchObject({ settled: 'turn', outcome: 'aborted' });
      expect(await queued).toEqual({ settled: 'dropped', reason: 'cleared' });
      expect(await during).toMatchObject({ settled: 'turn', outcome: 'replied' });
      // The input that waited was answered on the cleared history.
      expect((await h.stored('s')).map((m) => m.content)).toEqual(['during clear', 'ok']);
    },
  );
});
