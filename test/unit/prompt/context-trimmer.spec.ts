import fc from 'fast-check';
import type { ModelMessage, ToolCall } from '../../../src/contracts';
import {
  cutText,
  dropHistorySegments,
  TRIM_MARKERS,
  trimToBudget,
} from '../../../src/prompt/context-trimmer';
import { TURN_INPUT_FLAG } from '../../../src/prompt/prompt.assembler';

/** A simple, exact counter: one token per 4 characters plus 3 per message. */
const count = (m: ModelMessage) =>
  3 +
  Math.ceil((m.content.length + (m.reasoningContent?.length ?? 0)) / 4) +
  (m.toolCalls ?? []).reduce((s, c) => s + Math.ceil(c.function.arguments.length / 4) + 3, 0);
const total = (list: ModelMessage[]) => list.reduce((s, m) => s + count(m), 0);

const sys = (content: string, injector?: string): ModelMessage => ({
  role: 'system',
  content,
  metadata: injector
    ? { injector, bucket: 'systemOther' }
    : { injector: 'persona', bucket: 'persona' },
});
const user = (content: string, input = false): ModelMessage => ({
  role: 'user',
  content,
  metadata: input ? { [TURN_INPUT_FLAG]: true } : {},
});
const assistant = (content: string): ModelMessage => ({ role: 'assistant', content });
function group(id: string, result: string): ModelMessage[] {
  const call: ToolCall = { id, type: 'function', function: { name: 'lookup', arguments: '{}' } };
  return [
    { role: 'assistant', content: '', toolCalls: [call] },
    { role: 'tool', content: result, toolCallId: id },
  ];
}

describe('trimToBudget', () => {
  it('U3: a list within the budget is returned unchanged and not reported as exceeded', () => {
    const list = [sys('be nice'), user('hi', true)];
    const result = trimToBudget(list, { budget: 1000, count, toolTokens: 0 });
    expect(result).toEqual({ messages: list, exceeded: false, removed: 0 });
  });

  it('truncates long tool outputs, oldest first, before dropping anything', () => {
    const list = [
      sys('p'),
      user('q'),
      ...group('a', 'x'.repeat(4000)),
      ...group('b', 'y'.repeat(4000)),
      user('now', true),
    ];
    const result = trimToBudget(list, { budget: total(list) - 500, count, toolTokens: 0 });
    expect(result.exceeded).toBe(true);
    expect(result.messages).toHaveLength(list.length);
    expect(result.messages[3].content).toBe('x'.repeat(500) + TRIM_MARKERS.tool);
    // The latest tool group is protected.
    expect(result.messages[5].content).toBe('y'.repeat(4000));
  });

  it('shortens old reasoning but never removes it', () => {
    const old: ModelMessage = { ...assistant('a'), reasoningContent: 'r'.repeat(3000) };
    const list = [sys('p'), user('q'), old, user('now', true)];
    const result = trimToBudget(list, { budget: total(list) - 200, count, toolTokens: 0 });
    expect(result.messages[2].reasoningContent).toBe('r'.repeat(400) + TRIM_MARKERS.reasoning);
  });

  it('summarises old tool groups into one assistant message', () => {
    const list = [
      sys('p'),
      ...group('a', 'result of a '.repeat(100)),
      user('mid'),
      ...group('b', 'b'),
      user('now', true),
    ];
    const result = trimToBudget(list, { budget: total(list) - 250, count, toolTokens: 0 });
    expect(result.messages[1].role).toBe('assistant');
    expect(result.messages[1].toolCalls).toBeUndefined();
    expect(result.messages[1].content).toContain('lookup → result of a');
    expect(result.messages.filter((m) => m.role === 'tool')).toHaveLength(1);
  });

  it('drops the oldest history in whole groups and adds a continuation notice when much went', () => {
    const history = Array.from({ length: 20 }, (_, i) =>
      i % 2 ? assistant(`answer ${i} `.repeat(20)) : user(`question ${i} `.repeat(20)),
    );
    const list = [sys('persona'), ...history, user('now', true)];
    const result = trimToBudget(list, { budget: 400, count, toolTokens: 0 });
    expect(total(result.messages)).toBeLessThanOrEqual(400);
    expect(result.messages[0]).toBe(list[0]);
    expect(result.messages.at(-1)).toEqual(user('now', true));
    expect(result.messages.some((m) => m.content === TRIM_MARKERS.continuation)).toBe(true);
  });

  it('drops contributed system blocks last, never the first system message', () => {
    const list = [sys('persona'), sys('memory '.repeat(400), 'Mem/summary'), user('now', true)];
    const result = trimToBudget(list, { budget: 60, count, toolTokens: 0, systemAllowance: 10 });
    expect(result.messages.map((m) => m.content)).toEqual(['persona', 'now']);
  });

  it('never drops protected messages and never splits a tool group (property)', () => {
    const item = fc.oneof(
      fc.string({ maxLength: 400 }).map((s) => [user(s)]),
      fc.string({ maxLength: 400 }).map((s) => [assistant(s)]),
      fc.tuple(fc.uuid(), fc.string({ maxLength: 2000 })).map(([id, r]) => group(id, r)),
      fc.string({ maxLength: 800 }).map((s) => [sys(s, 'X/y')]),
    );
    fc.assert(
      fc.property(
        fc.array(item, { maxLength: 25 }),
        fc.integer({ min: 10, max: 3000 }),
        (items, budget) => {
          const list = [sys('persona'), ...items.flat(), user('input', true)];
          const { messages } = trimToBudget(list, { budget, count, toolTokens: 0 });
          expect(messages[0]).toBe(list[0]);
          expect(messages.filter((m) => m.metadata?.[TURN_INPUT_FLAG])).toHaveLength(1);
          const lastGroupCall = [...list].reverse().find((m) => m.toolCalls?.length);
          if (lastGroupCall) expect(messages).toContain(lastGroupCall);
          messages.forEach((m, i) => {
            if (m.role === 'tool') {
              const prev = messages
                .slice(0, i)
                .reverse()
                .find((p) => p.role !== 'tool');
              expect(prev?.toolCalls?.some((c) => c.id === m.toolCallId)).toBe(true);
            }
            if (m.toolCalls?.length) {
              const ids = messages
                .slice(i + 1)
                .filter(
                  (r, k, rest) =>
                    r.role === 'tool' && rest.slice(0, k).every((p) => p.role === 'tool'),
                );
              expect(ids.map((r) => r.toolCallId)).toEqual(m.toolCalls.map((c) => c.id));
            }
          });
        },
      ),
      { numRuns: process.env.CI ? 500 : 200 },
    );
  });

  it('a changed message loses its persisted token count', () => {
    const big: ModelMessage = {
      role: 'tool',
      content: 'z'.repeat(5000),
      toolCallId: 'a',
      metadata: { tokenCount: { cl100k_base: 1 } },
    };
    const list = [
      sys('p'),
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }],
      } as ModelMessage,
      big,
      ...group('b', 'b'),
      user('now', true),
    ];
    const result = trimToBudget(list, { budget: 200, count, toolTokens: 0 });
    const cut = result.messages.find((m) => m.role === 'tool' && m.toolCallId === 'a');
    if (cut) expect(cut.metadata?.tokenCount).toBeUndefined();
  });
});

describe('dropHistorySegments', () => {
  it('U3: history beyond its allowance loses its oldest segments even when the request would fit', () => {
    const history = Array.from({ length: 10 }, (_, i) => user(`message ${i} `.repeat(10)));
    const list = [sys('p'), ...history, user('now', true)];
    const per = count(history[0]);
    const { messages, dropped } = dropHistorySegments(list, {
      allowance: per * 6,
      segment: per * 2,
      count,
    });
    expect(dropped).toBe(4);
    expect(messages.map((m) => m.content)).toEqual([
      'p',
      ...history.slice(4).map((m) => m.content),
      'now',
    ]);
  });

  it('never splits a tool group and never touches the inputs', () => {
    const list = [sys('p'), ...group('a', 'r'.repeat(400)), user('q'), user('now', true)];
    const { messages } = dropHistorySegments(list, { allowance: 10, segment: 1, count });
    expect(messages).toEqual([sys('p'), user('q'), user('now', true)]);
  });
});

describe('cutText', () => {
  it('does not split a surrogate pair', () => {
    expect(cutText('ab😀cd', 3)).toBe('ab');
    expect(cutText('abc', 5)).toBe('abc');
  });
});
