import { Injectable } from '@nestjs/common';
import {
  AgentTool,
  WellKnownMetadataKeys as K,
  type ApprovalRecord,
  type Message,
  type Settlement,
  type ToolSpec,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

/**
 * Human approval before a tool runs (issue 20), through the library (`AgentService.approve`),
 * against a real local OpenAI-compatible server that scripts the model's tool call: approved,
 * denied, timed out, stopped while waiting, an input joining meanwhile, the turn deadline paused
 * during the wait, a `needsApproval` function of the arguments, and the decision persisted on the
 * tool result's metadata.
 */
/** A provider whose `@AgentTool` asks for approval when the amount is over 100. */
@Injectable()
class Payments {
  readonly paid: number[] = [];

  @AgentTool({
    name: 'pay',
    description: 'Pays an amount',
    parameters: { type: 'object', properties: { amount: { type: 'number' } } },
    needsApproval: (args: { amount: number }) => args.amount > 100,
  })
  pay(args: { amount: number }): string {
    this.paid.push(args.amount);
    return 'paid';
  }
}

describe('human approval before a tool runs', () => {
  let h: AgentHarness;
  let ran: unknown[];
  afterEach(() => h?.close());

  const transfer = (needsApproval: ToolSpec['needsApproval'] = true): ToolSpec => ({
    name: 'transfer',
    description: 'Moves money',
    parameters: {
      type: 'object',
      properties: { amount: { type: 'number' } },
      required: ['amount'],
    },
    needsApproval,
    handler: (args) => {
      ran.push(args);
      return { done: true };
    },
  });

  async function start(agent: Record<string, unknown> = {}, tool = transfer()) {
    ran = [];
    h = await AgentHarness.start({ agent: { tools: [tool], ...agent } });
  }

  /** The model calls `transfer` once, then answers `text`. */
  const scriptCall = (amount = 500, text = 'finished') =>
    h.server.enqueue({ toolCalls: [{ name: 'transfer', arguments: { amount } }] }, { text });

  const requested = () => h.waitFor('agent:approval', (e) => e.phase === 'requested');
  const toolResult = async (sessionId: string): Promise<Message> =>
    (await h.stored(sessionId)).find((m) => m.role === 'tool')!;
  /** What the model's second call was told about the tool call. */
  const toldModel = () =>
    h.server.requests[1].messages.find((m: { role: string }) => m.role === 'tool').content;

  it('an approved call waits for the decision, then runs; the decision is persisted', async () => {
    await start();
    scriptCall();
    const settled = h.agent.handleMessage({ sessionId: 's', content: 'pay' });
    const request = await requested();

    expect(request).toMatchObject({ sessionId: 's', name: 'transfer', args: { amount: 500 } });
    expect(ran).toEqual([]);
    expect(await h.agent.approvals('s')).toEqual([
      {
        sessionId: 's',
        turnId: request.turnId,
        callId: request.callId,
        name: 'transfer',
        args: { amount: 500 },
        requestedAt: expect.any(String),
      },
    ]);
    const by = { platform: 'web', userId: 'alice' };
    expect(await h.agent.approve('s', request.callId, { approved: true, by })).toBe(true);

    expect(await settled).toMatchObject({ outcome: 'replied', reply: 'finished' });
    expect(ran).toEqual([{ amount: 500 }]);
    expect(await h.agent.approvals('s')).toEqual([]);
    const tool = await toolResult('s');
    expect(tool.metadata[K.CallId]).toBe(request.callId);
    expect(tool.metadata[K.Approval]).toEqual({ approved: true, by, at: expect.any(String) });
    expect(toldModel()).toBe('{"done":true}');
    expect(h.of('agent:approval').map((e) => e.phase)).toEqual(['requested', 'decided']);
    expect(await h.agent.approve('s', request.callId, { approved: true })).toBe(false);
  });

  it('a denied call does not run; the model is told who denied it and why', async () => {
    await start();
    scriptCall(500, 'understood');
    const settled = h.agent.handleMessage({ sessionId: 's', content: 'pay' });
    const { callId } = await requested();
    const by = { platform: 'web', userId: 'alice' };

    await h.agent.approve('s', callId, { approved: false, reason: 'too risky', by });

    expect(await settled).toMatchObject({ outcome: 'replied', reply: 'understood' });
    expect(ran).toEqual([]);
    expect(toldModel()).toBe(
      '{"error":"The call to \\"transfer\\" was denied by alice: too risky"}',
    );
    const record = (await toolResult('s')).metadata[K.Approval] as ApprovalRecord;
    expect(record).toEqual({ approved: false, by, reason: 'too risky', at: expect.any(String) });
    expect(h.of('tool:execute').find((e) => e.phase === 'end')?.ok).toBe(false);
  });

  it('a call nobody decides within approvalTimeoutMs does not run and says so', async () => {
    await start({ approvalTimeoutMs: 200 });
    scriptCall(500, 'ok then');

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'pay' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'ok then' });
    expect(ran).toEqual([]);
    expect(toldModel()).toBe(
      '{"error":"The call to \\"transfer\\" was not approved within 0.2 s"}',
    );
    expect((await toolResult('s')).metadata[K.Approval]).toEqual({
      approved: false,
      at: expect.any(String),
      timedOut: true,
    });
    expect(await h.agent.approvals('s')).toEqual([]);
  });

  it('an abort while the call waits ends the turn aborted; the tool never runs', async () => {
    await start();
    scriptCall();
    const settled = h.agent.handleMessage({ sessionId: 's', content: 'pay' });
    const { callId } = await requested();

    expect(await h.agent.abortAsync('s')).toBe(true);

    expect(await settled).toMatchObject({ settled: 'turn', outcome: 'aborted' });
    expect(ran).toEqual([]);
    expect(await h.agent.approvals('s')).toEqual([]);
    expect(await h.agent.approve('s', callId, { approved: true })).toBe(false);
    expect(h.of('agent:approval').at(-1)).toMatchObject({ phase: 'decided', stopped: true });
    expect(h.server.requests).toHaveLength(1);
  });

  it('a human input sent while the call waits joins the turn at its next model call', async () => {
    await start();
    scriptCall();
    const first = h.agent.handleMessage({ sessionId: 's', content: 'pay' });
    const { callId, turnId } = await requested();
    const joined = h.agent.handleMessage({ sessionId: 's', content: 'and say thanks' });
    await h.waitFor('agent:queue', (e) => e.waiting.length === 1);

    await h.agent.approve('s', callId, { approved: true });

    const [a, b] = (await Promise.all([first, joined])) as Extract<
      Settlement,
      { settled: 'turn' }
    >[];
    expect(a.turnId).toBe(turnId);
    expect(b.turnId).toBe(turnId);
    expect(JSON.stringify(h.server.requests[1].messages)).toContain('and say thanks');
    const input = (await h.stored('s')).find((m) => m.content === 'and say thanks');
    expect(input?.metadata[K.TurnEntry]).toBe('joined');
  });

  it('the wait for approval does not count against turnTimeoutMs', async () => {
    // The call waits 600 ms (its approval timeout), twice the turn deadline of 300 ms.
    await start({ turnTimeoutMs: 300, approvalTimeoutMs: 600 });
    scriptCall(500, 'still here');

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'pay' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'still here' });
    expect(toldModel()).toContain('was not approved within 0.6 s');
  });

  it('a needsApproval function decides per call: a small amount runs at once', async () => {
    await start(
      {},
      transfer((args: { amount: number }) => args.amount > 100),
    );
    scriptCall(5, 'paid');

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'pay a little' });

    expect(settled).toMatchObject({ outcome: 'replied', reply: 'paid' });
    expect(ran).toEqual([{ amount: 5 }]);
    expect(h.of('agent:approval')).toEqual([]);
    expect((await toolResult('s')).metadata[K.Approval]).toBeUndefined();
  });

  it('@AgentTool({ needsApproval }) is honoured: a large amount waits, is approved, then runs', async () => {
    h = await AgentHarness.start({ providers: [Payments] });
    h.server.enqueue(
      { toolCalls: [{ name: 'pay', arguments: { amount: 5 } }] },
      { toolCalls: [{ name: 'pay', arguments: { amount: 500 } }] },
      { text: 'both paid' },
    );
    const settled = h.agent.handleMessage({ sessionId: 's', content: 'pay twice' });
    const request = await requested();
    const payments = h.app.get(Payments);

    expect(request).toMatchObject({ name: 'pay', args: { amount: 500 } });
    expect(payments.paid).toEqual([5]);
    await h.agent.approve('s', request.callId, { approved: true });

    expect(await settled).toMatchObject({ outcome: 'replied', reply: 'both paid' });
    expect(payments.paid).toEqual([5, 500]);
  });
});
