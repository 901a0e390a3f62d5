import { ControlKinds, type Message, type ToolCall } from '../../../src/contracts';
import { historyToModelMessages, sanitiseToolGroups } from '../../../src/prompt/history-window';

let seq = 0;

/** A persisted message with defaults. */
const message = (overrides: Partial<Message> & Pick<Message, 'role'>): Message => ({
  id: `m${++seq}`,
  sessionId: 's1',
  content: '',
  metadata: {},
  createdAt: new Date(0).toISOString(),
  ...overrides,
});

const call = (id: string, name = 'lookup'): ToolCall => ({
  id,
  type: 'function',
  function: { name, arguments: '{}' },
});

const userMsg = (content: string) => message({ role: 'user', content });
const assistantMsg = (content: string) => message({ role: 'assistant', content });
const toolCallMsg = (...ids: string[]) =>
  message({ role: 'assistant', content: '', toolCalls: ids.map((id) => call(id)) });
const toolResult = (id: string, content = `result ${id}`) =>
  message({ role: 'tool', content, toolCallId: id });

/** Role and content (or tool call ids) of each message. */
const shape = (
  messages: readonly Pick<Message, 'role' | 'content' | 'toolCalls' | 'toolCallId'>[],
) =>
  messages.map((m) =>
    m.toolCalls
      ? `${m.role}:calls(${m.toolCalls.map((c) => c.id).join(',')})`
      : m.toolCallId
        ? `${m.role}:result(${m.toolCallId})`
        : `${m.role}:${m.content}`,
  );

describe('sanitiseToolGroups', () => {
  it('keeps a complete tool-call group (results in any order)', () => {
    const history = [
      userMsg('q'),
      toolCallMsg('a', 'b'),
      toolResult('b'),
      toolResult('a'),
      assistantMsg('answer'),
    ];

    const { kept, dropped } = sanitiseToolGroups(history);

    expect(kept).toEqual(history);
    expect(dropped).toBe(0);
  });

  it('drops a tool result that has no call before it', () => {
    const { kept, dropped } = sanitiseToolGroups([
      userMsg('q'),
      toolResult('ghost'),
      assistantMsg('answer'),
    ]);

    expect(shape(kept)).toEqual(['user:q', 'assistant:answer']);
    expect(dropped).toBe(1);
  });

  it('drops a tool call whose results are not all there, with the results it has', () => {
    const { kept, dropped } = sanitiseToolGroups([
      userMsg('q'),
      toolCallMsg('a', 'b'),
      toolResult('a'),
      userMsg('next'),
    ]);

    expect(shape(kept)).toEqual(['user:q', 'user:next']);
    expect(dropped).toBe(2);
  });

  it('drops a call with no results at all, keeping what follows', () => {
    const { kept, dropped } = sanitiseToolGroups([toolCallMsg('a'), assistantMsg('after')]);

    expect(shape(kept)).toEqual(['assistant:after']);
    expect(dropped).toBe(1);
  });

  it('drops a result that belongs to an earlier group, after the group it follows is complete', () => {
    const { kept, dropped } = sanitiseToolGroups([
      toolCallMsg('a'),
      toolResult('a'),
      toolResult('a'),
      userMsg('q'),
    ]);

    expect(shape(kept)).toEqual(['assistant:calls(a)', 'tool:result(a)', 'user:q']);
    expect(dropped).toBe(1);
  });

  it('a result separated from its call by another message is an orphan, and so is the call', () => {
    const { kept, dropped } = sanitiseToolGroups([
      toolCallMsg('a'),
      userMsg('interjection'),
      toolResult('a'),
    ]);

    expect(shape(kept)).toEqual(['user:interjection']);
    expect(dropped).toBe(2);
  });

  it('keeps the complete groups around a broken one', () => {
    const { kept } = sanitiseToolGroups([
      toolCallMsg('a'),
      toolResult('a'),
      toolCallMsg('b', 'c'),
      toolResult('b'),
      toolCallMsg('d'),
      toolResult('d'),
    ]);

    expect(shape(kept)).toEqual([
      'assistant:calls(a)',
      'tool:result(a)',
      'assistant:calls(d)',
      'tool:result(d)',
    ]);
  });
});

describe('historyToModelMessages', () => {
  it('leaves event markers out and keeps stop markers as system notes with metadata.kind', () => {
    const stop = message({
      role: 'system',
      kind: ControlKinds.TurnStopped,
      content: 'The previous turn was stopped before it answered.',
    });
    const history = [
      userMsg('q1'),
      message({ role: 'system', kind: ControlKinds.EventMarker, content: '' }),
      stop,
      userMsg('q2'),
    ];

    const out = historyToModelMessages(history);

    expect(out.map((m) => `${m.role}:${m.content}`)).toEqual([
      'user:q1',
      'system:The previous turn was stopped before it answered.',
      'user:q2',
    ]);
    expect(out[1].metadata).toMatchObject({ kind: ControlKinds.TurnStopped, historyId: stop.id });
  });

  it('sanitises orphan tool calls and keeps complete groups with their wire fields', () => {
    const group = toolCallMsg('a');
    const history = [userMsg('q'), toolResult('orphan'), group, toolResult('a', 'sunny')];

    const out = historyToModelMessages(history);

    expect(out).toEqual([
      { role: 'user', content: 'q', metadata: { historyId: history[0].id } },
      {
        role: 'assistant',
        content: '',
        toolCalls: group.toolCalls,
        metadata: { historyId: group.id },
      },
      { role: 'tool', content: 'sunny', toolCallId: 'a', metadata: { historyId: history[3].id } },
    ]);
  });

  it('an event marker between a call and its results does not break the group', () => {
    const history = [
      toolCallMsg('a'),
      message({ role: 'system', kind: ControlKinds.EventMarker, content: '' }),
      toolResult('a'),
    ];

    expect(shape(historyToModelMessages(history))).toEqual([
      'assistant:calls(a)',
      'tool:result(a)',
    ]);
  });

  it('carries reasoning content and the cached token count, but no other metadata', () => {
    const history = [
      message({
        role: 'assistant',
        content: 'hi',
        reasoningContent: 'thinking',
        metadata: { tokenCount: { o200k_base: 3 }, turnId: 't1' },
      }),
    ];

    const [out] = historyToModelMessages(history);

    expect(out.reasoningContent).toBe('thinking');
    expect(out.metadata).toEqual({ historyId: history[0].id, tokenCount: { o200k_base: 3 } });
  });
});
