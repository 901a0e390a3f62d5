import { Injectable } from '@nestjs/common';
import {
  AgentInstrumentation,
  ToolRegistry,
  type ChatResponse,
  type ModelCallInfo,
  type Settlement,
  type ToolCallInfo,
  type ToolResult,
  type TurnConclusion,
  type TurnInfo,
} from '../../src';
import { AgentHarness } from '../support/agent-harness';

/** A host's instrumentation, bound by class: records what each wrapper saw and returned. */
@Injectable()
class RecordingInstrumentation extends AgentInstrumentation {
  readonly seen: { kind: string; info: unknown; result?: unknown; error?: string }[] = [];

  override input(
    info: Parameters<AgentInstrumentation['input']>[0],
    run: () => Promise<Settlement>,
  ) {
    return this.record('input', info, run);
  }

  override turn(info: TurnInfo, run: () => Promise<TurnConclusion>) {
    return this.record('turn', info, run);
  }

  override modelCall(info: ModelCallInfo, run: () => Promise<ChatResponse>) {
    return this.record('modelCall', info, run);
  }

  override toolCall(info: ToolCallInfo, run: () => Promise<ToolResult>) {
    return this.record('toolCall', info, run);
  }

  private async record<T>(kind: string, info: unknown, run: () => Promise<T>): Promise<T> {
    try {
      const result = await run();
      this.seen.push({ kind, info, result });
      return result;
    } catch (error) {
      this.seen.push({ kind, info, error: String(error) });
      throw error;
    }
  }
}

describe('instrumentation seam (AgentInstrumentation)', () => {
  let h: AgentHarness;
  afterEach(() => h?.close());

  function echoTool() {
    h.app.get(ToolRegistry).register({
      name: 'echo',
      description: 'Echoes its text',
      parameters: { type: 'object', properties: { text: { type: 'string' } } },
      handler: (args: { text?: string }) => ({ echoed: args.text }),
    });
  }

  it('T1 / T2: a host bound by class sees the input, the turn, each model call and each tool call with their ids', async () => {
    h = await AgentHarness.start({
      extraProviders: [{ provide: AgentInstrumentation, useClass: RecordingInstrumentation }],
    });
    echoTool();
    h.server.enqueue({ toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] }, { text: 'done' });

    const settled = await h.agent.handleMessage({ sessionId: 's', content: 'hi', source: 'job' });

    const recorder = h.app.get<AgentInstrumentation, RecordingInstrumentation>(
      AgentInstrumentation,
    );
    expect(recorder).toBeInstanceOf(RecordingInstrumentation);
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied', reply: 'done' });
    const turnId = settled.settled === 'turn' ? settled.turnId : '';
    const tool = h.events.find((e) => e.name === 'tool:execute')!.payload as { callId: string };
    const base = { sessionId: 's', turnId };
    expect(recorder.seen.map((s) => s.kind)).toEqual([
      'modelCall',
      'toolCall',
      'modelCall',
      'turn',
      'input',
    ]);
    expect(recorder.seen[0].info).toMatchObject({
      ...base,
      provider: 'openai',
      model: 'test-model',
      call: 1,
    });
    expect(recorder.seen[1]).toMatchObject({
      info: { ...base, callId: tool.callId, name: 'echo' },
      result: { ok: true },
    });
    expect(recorder.seen[2]).toMatchObject({ info: { call: 2 }, result: { content: 'done' } });
    expect(recorder.seen[3]).toMatchObject({
      info: { ...base, source: 'job', opened: 1 },
      result: { turnId, outcome: 'replied', reply: 'done' },
    });
    expect(recorder.seen[4]).toMatchObject({
      info: { sessionId: 's', source: 'job' },
      result: settled,
    });
  });

  it('a layer registered with use() wraps model calls, sees failures, and is removed by its dispose', async () => {
    h = await AgentHarness.start();
    const instrumentation = h.app.get(AgentInstrumentation);
    const outcomes: string[] = [];
    const dispose = instrumentation.use({
      modelCall: async (info, run) => {
        try {
          const response = await run();
          outcomes.push(`ok ${info.call}`);
          return response;
        } catch (error) {
          outcomes.push(`error ${info.call}`);
          throw error;
        }
      },
    });
    h.server.enqueue({ text: 'first' }, { status: 500, body: { error: { message: 'boom' } } });

    await h.agent.handleMessage({ sessionId: 'a', content: 'one' });
    const failed = await h.agent.handleMessage({ sessionId: 'a', content: 'two' });
    dispose();
    h.server.enqueue({ text: 'third' });
    await h.agent.handleMessage({ sessionId: 'a', content: 'three' });

    expect(failed).toMatchObject({ settled: 'turn', outcome: 'error' });
    expect(outcomes).toEqual(['ok 1', 'error 1']);
  });
});
