import { ToolRegistry } from '../../src/agent';
import { WellKnownMetadataKeys as K } from '../../src';
import { describePg } from '../contracts/sql-test-db';
import { useDistributedApps, type DistributedApp } from '../support/distributed-apps';
import { describeRedis } from '../support/redis-test';

jest.setTimeout(30_000);

/**
 * Human approval before a tool runs (issue 20) in distributed mode, with two instances on one
 * Redis prefix and one PostgreSQL schema: a call waits on the instance that runs its turn, and
 * the other instance lists and decides it through the holder request path (as abort does).
 */
describeRedis('approvals across instances (distributed mode)', () => {
  describePg('on PostgreSQL', () => {
    const t = useDistributedApps();
    let ran: string[];

    /** Starts two instances, each with the `deploy` tool that needs approval. */
    async function twoInstances(): Promise<[DistributedApp, DistributedApp]> {
      ran = [];
      const apps = [await t.apps.start('inst-a'), await t.apps.start('inst-b')];
      for (const app of apps) {
        app.harness.app.get(ToolRegistry).register({
          name: 'deploy',
          description: 'Deploys a service',
          parameters: { type: 'object', properties: { service: { type: 'string' } } },
          needsApproval: true,
          handler: () => {
            ran.push(app.id);
            return 'deployed';
          },
        });
      }
      return [apps[0], apps[1]];
    }

    /** The model calls `deploy` then answers; resolves once the call waits, with its holder. */
    async function waitingCall(a: DistributedApp, b: DistributedApp, text: string) {
      t.server.enqueue(
        { toolCalls: [{ name: 'deploy', arguments: { service: 'api' } }] },
        { text },
      );
      const requested = Promise.race(
        [a, b].map((app) => app.harness.waitFor('agent:approval', (e) => e.phase === 'requested')),
      );
      const settled = a.harness.agent.handleMessage({ sessionId: 's', content: 'deploy it' });
      const request = await requested;
      const [holder] = t.apps.ranOn(request.turnId);
      return { request, settled, holder, other: holder === a ? b : a };
    }

    it('the instance that does not run the turn lists the waiting call and approves it on the holder', async () => {
      const [a, b] = await twoInstances();
      const { request, settled, holder, other } = await waitingCall(a, b, 'deployed it');

      expect(await other.harness.agent.approvals('s')).toEqual([
        expect.objectContaining({
          callId: request.callId,
          name: 'deploy',
          args: { service: 'api' },
        }),
      ]);
      const by = { platform: 'web', userId: 'alice' };
      expect(await other.harness.agent.approve('s', request.callId, { approved: true, by })).toBe(
        true,
      );

      await expect(settled).resolves.toMatchObject({ outcome: 'replied', reply: 'deployed it' });
      expect(ran).toEqual([holder.id]);
      const tool = (await a.harness.stored('s')).find((m) => m.role === 'tool')!;
      expect(tool.metadata[K.Approval]).toEqual({ approved: true, by, at: expect.any(String) });
      expect(await other.harness.agent.approve('s', request.callId, { approved: true })).toBe(
        false,
      );
      expect(await other.harness.agent.approvals('s')).toEqual([]);
    });

    it('a denial from the other instance reaches the holder: the tool does not run', async () => {
      const [a, b] = await twoInstances();
      const { request, settled, other } = await waitingCall(a, b, 'not deployed');

      expect(await other.harness.agent.approve('s', 'no-such-call', { approved: true })).toBe(
        false,
      );
      const decision = {
        approved: false,
        reason: 'freeze',
        by: { platform: 'web', userId: 'bob' },
      };
      expect(await other.harness.agent.approve('s', request.callId, decision)).toBe(true);

      await expect(settled).resolves.toMatchObject({ outcome: 'replied', reply: 'not deployed' });
      expect(ran).toEqual([]);
      const tool = (await a.harness.stored('s')).find((m) => m.role === 'tool')!;
      expect(tool.content).toBe('{"error":"The call to \\"deploy\\" was denied by bob: freeze"}');
    });
  });
});
