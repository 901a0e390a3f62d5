import { AgUiEncoder, agUiProtocol } from '../../../../src/api/ag-ui/ag-ui.encoder';
import type { FeedItem } from '../../../../src/api/replay/turn-feed';

const sessionId = 's';
const turnId = 't';
let seq = 0;
const delta = (text: string): FeedItem => ({
  name: 'outbound:stream',
  event: { sessionId, turnId, delta: text, seq: ++seq },
});
const thinking = (text: string): FeedItem => ({
  name: 'outbound:stream',
  event: { sessionId, turnId, reasoningDelta: text, seq: ++seq },
});
const tool = (phase: 'start' | 'end'): FeedItem => ({
  name: 'tool:execute',
  event: {
    sessionId,
    turnId,
    callId: 'c1',
    name: 'lookup',
    phase,
    args: { q: 1 },
    result: 'r',
    seq: ++seq,
  },
});

describe('AgUiEncoder', () => {
  it('pairs every start with its end: reasoning, tool call, text', () => {
    const encoder = new AgUiEncoder(turnId);
    const events = [thinking('hm'), tool('start'), tool('end'), delta('a'), delta('b')]
      .concat({
        name: 'agent:turn:end',
        event: { sessionId, turnId, outcome: 'replied', seq: ++seq },
      })
      .flatMap((item) => encoder.encode(item));
    expect(events.map((e) => e.type)).toEqual([
      'REASONING_START',
      'REASONING_MESSAGE_START',
      'REASONING_MESSAGE_CONTENT',
      'REASONING_MESSAGE_END',
      'REASONING_END',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'TOOL_CALL_RESULT',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
    ]);
    expect(events[6]).toEqual({ type: 'TOOL_CALL_ARGS', toolCallId: 'c1', delta: '{"q":1}' });
  });

  it('a tool end seen without its start still gets the call before the result', () => {
    const types = new AgUiEncoder(turnId).encode(tool('end')).map((e) => e.type);
    expect(types).toEqual([
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'TOOL_CALL_RESULT',
    ]);
  });

  it('the run: RUN_STARTED with the client ids; RUN_FINISHED or RUN_ERROR at the end', () => {
    const protocol = agUiProtocol('thread', 'run');
    expect(protocol.open()).toEqual([{ type: 'RUN_STARTED', threadId: 'thread', runId: 'run' }]);
    expect(protocol.finish({ turnId, outcome: 'aborted' })).toEqual([
      {
        type: 'RUN_FINISHED',
        threadId: 'thread',
        runId: 'run',
        result: { turnId, outcome: 'aborted' },
      },
    ]);
    expect(protocol.finish({ turnId, outcome: 'error', error: '[system] no model' })).toEqual([
      { type: 'RUN_ERROR', message: '[system] no model', code: 'turn-error' },
    ]);
    expect(protocol.dropped({ settled: 'dropped', reason: 'cleared' })).toEqual([
      {
        type: 'RUN_ERROR',
        message: 'The input was dropped (cleared) before any turn',
        code: 'dropped:cleared',
      },
    ]);
  });
});
