import fc from 'fast-check';
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

  it('leaves excluded ids out as if they were not there, also between a call and its results', () => {
    const own = userMsg('this turn');
    const history = [userMsg('q'), toolCallMsg('a'), own, toolResult('a'), userMsg('q2')];

    const out = historyToModelMessages(history, { exclude: new Set([own.id]) });

    expect(shape(out)).toEqual(
      shape(historyToModelMessages(history.filter((m) => m.id !== own.id))),
    );
    expect(out.map((m) => m.metadata?.historyId)).not.toContain(own.id);
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

describe('the one-pass history view', () => {
  /** The view as it was first written: markers filtered, then groups checked with a set. */
  function reference(history: readonly Message[]) {
    const visible = history.filter((m) => m.kind !== ControlKinds.EventMarker);
    const kept: Message[] = [];
    let dropped = 0;
    for (let i = 0; i < visible.length; i++) {
      const m = visible[i];
      if (m.role === 'tool') {
        dropped++;
        continue;
      }
      if (m.role !== 'assistant' || !m.toolCalls?.length) {
        kept.push(m);
        continue;
      }
      const expected = new Set(m.toolCalls.map((c) => c.id));
      const results: Message[] = [];
      let j = i + 1;
      while (j < visible.length && visible[j].role === 'tool') {
        const id = visible[j].toolCallId;
        if (id === undefined || !expected.has(id)) break;
        expected.delete(id);
        results.push(visible[j]);
        j++;
      }
      if (expected.size === 0) kept.push(m, ...results);
      else dropped += 1 + results.length;
      i = j - 1;
    }
    return { kept, dropped };
  }

  it('keeps and drops exactly what the filter-then-check reference does, for any history', () => {
    const ids = ['a', 'b', 'c'];
    // Makers of one or more messages: single messages of every kind, and whole groups (a call
    // with its results in any order, an event marker possibly among them), so that complete,
    // broken and interleaved groups all occur often.
    const single = fc.oneof(
      fc.constant(() => [userMsg('q')]),
      fc.constant(() => [assistantMsg('answer')]),
      fc.constant(() => [
        message({ role: 'system', content: 'note', kind: ControlKinds.EventMarker }),
      ]),
      fc.subarray(ids, { minLength: 1 }).map((picked) => () => [toolCallMsg(...picked)]),
      fc
        .option(fc.constantFrom(...ids), { nil: undefined })
        .map((id) => () => [
          id === undefined ? message({ role: 'tool', content: 'r' }) : toolResult(id),
        ]),
    );
    const group = fc
      .tuple(fc.shuffledSubarray(ids, { minLength: 1 }), fc.boolean(), fc.nat(3))
      .map(([picked, marker, at]) => () => {
        const results = picked.map((id) => toolResult(id));
        if (marker) {
          const note = message({ role: 'system', content: 'n', kind: ControlKinds.EventMarker });
          results.splice(at % (results.length + 1), 0, note);
        }
        return [toolCallMsg(...[...picked].sort()), ...results];
      });
    const item = fc.oneof(single, group);
    let keptGroups = 0;
    let droppedSome = 0;
    fc.assert(
      fc.property(fc.array(item, { maxLength: 10 }), (makers) => {
        const history = makers.flatMap((make) => make());
        const expected = reference(history);
        if (expected.kept.some((m) => m.role === 'tool')) keptGroups++;
        if (expected.dropped > 0) droppedSome++;
        const visible = history.filter((m) => m.kind !== ControlKinds.EventMarker);
        expect(sanitiseToolGroups(visible)).toEqual(expected);
        expect(historyToModelMessages(history).map((m) => m.metadata?.historyId)).toEqual(
          expected.kept.map((m) => m.id),
        );
      }),
      { numRuns: 2000 },
    );
    // Not vacuous: complete groups were kept and broken ones dropped in many runs.
    expect(keptGroups).toBeGreaterThan(100);
    expect(droppedSome).toBeGreaterThan(100);
  });
});
