import type { ModelMessage } from '../../../src/contracts';
import {
  bucketMessages,
  classifyMessage,
  countConversationMessages,
  estimatedPromptTokens,
  usageParts,
} from '../../../src/usage/usage-breakdown';

/** A fake counter: one token per character, so expected sums are easy to read. */
const chars = (m: ModelMessage): number => m.content.length;
const sys = (content: string, metadata?: Record<string, unknown>): ModelMessage => ({
  role: 'system',
  content,
  metadata,
});

describe('usage breakdown', () => {
  it('U7: buckets system blocks by metadata.bucket and records their injectors', () => {
    expect(classifyMessage(sys('x', { bucket: 'persona' }))).toEqual({ bucket: 'persona' });
    expect(
      classifyMessage(sys('x', { bucket: 'memorySummary', injector: 'MemoryModule/summary' })),
    ).toEqual({ bucket: 'memorySummary', injector: 'MemoryModule/summary' });
    expect(classifyMessage(sys('x', { bucket: 'nonsense' }))).toEqual({ bucket: 'systemOther' });
    expect(classifyMessage(sys('x'))).toEqual({ bucket: 'systemOther' });
    expect(classifyMessage(sys('x', { injector: 'Third/party' }))).toEqual({
      bucket: 'systemOther',
      injector: 'Third/party',
    });
  });

  it('U7: control-kind system messages count as history; tool results as toolResults', () => {
    expect(classifyMessage(sys('stopped', { kind: 'turn-stopped' }))).toEqual({
      bucket: 'history',
    });
    expect(classifyMessage({ ...sys('marker'), kind: 'event-marker' })).toEqual({
      bucket: 'history',
    });
    expect(classifyMessage(sys('x', { kind: 'something-else' }))).toEqual({
      bucket: 'systemOther',
    });
    expect(classifyMessage({ role: 'tool', content: 'r', toolCallId: 'c' })).toEqual({
      bucket: 'toolResults',
    });
    expect(classifyMessage({ role: 'user', content: 'u' })).toEqual({ bucket: 'history' });
    expect(classifyMessage({ role: 'assistant', content: 'a' })).toEqual({ bucket: 'history' });
  });

  it('U7: system is the sum of the seven sub-buckets; toolDefs and reservedForReply as given', () => {
    const list: ModelMessage[] = [
      sys('p'.repeat(10), { bucket: 'persona', injector: 'Core/persona' }),
      sys('s'.repeat(20), { bucket: 'skills', injector: 'Skills/discovery' }),
      sys('s'.repeat(5), { bucket: 'skills', injector: 'Skills/activation' }),
      sys('o'.repeat(7)),
      sys('m'.repeat(3), { kind: 'turn-stopped' }),
      { role: 'user', content: 'u'.repeat(11) },
      { role: 'tool', content: 't'.repeat(13), toolCallId: 'c' },
    ];
    const { breakdown, injectors } = bucketMessages(list, chars, 40, 4096);
    expect(breakdown).toEqual({
      system: 42,
      persona: 10,
      memorySummary: 0,
      memoryVector: 0,
      skills: 25,
      platform: 0,
      subtask: 0,
      systemOther: 7,
      history: 14,
      toolResults: 13,
      toolDefs: 40,
      reservedForReply: 4096,
    });
    expect(injectors).toEqual({
      persona: { 'Core/persona': 10 },
      skills: { 'Skills/discovery': 20, 'Skills/activation': 5 },
    });
    expect(estimatedPromptTokens(breakdown)).toBe(42 + 14 + 13 + 40);
  });

  it('U7: parts are display-ordered with injectors keyed by global key', () => {
    const list: ModelMessage[] = [
      sys('h'.repeat(9), { bucket: 'platform', injector: 'Im/hint' }),
      sys('o'.repeat(4), { bucket: 'systemOther', injector: 'Profile/user' }),
      sys('o'.repeat(6)),
      sys('v'.repeat(8), { bucket: 'memoryVector', injector: 'MemoryModule/vector' }),
      sys('p'.repeat(10), { bucket: 'persona' }),
      { role: 'user', content: 'u'.repeat(3) },
      sys('k'.repeat(2), { bucket: 'skills', injector: 'Skills/activation' }),
      sys('m'.repeat(5), { bucket: 'memorySummary', injector: 'MemoryModule/summary' }),
      sys('s'.repeat(1), { bucket: 'subtask', injector: 'Subtasks/parent-status' }),
    ];
    expect(usageParts(bucketMessages(list, chars, 12, 999))).toEqual([
      { label: 'Persona', tokens: 10 },
      { label: 'Skills', tokens: 2, injectors: { 'Skills/activation': 2 } },
      { label: 'Memory summary', tokens: 5, injectors: { 'MemoryModule/summary': 5 } },
      { label: 'Memory (retrieved)', tokens: 8, injectors: { 'MemoryModule/vector': 8 } },
      { label: 'Platform', tokens: 9, injectors: { 'Im/hint': 9 } },
      { label: 'Subtasks', tokens: 1, injectors: { 'Subtasks/parent-status': 1 } },
      { label: 'Other system', tokens: 10, injectors: { 'Profile/user': 4 } },
      { label: 'History', tokens: 3 },
      { label: 'Tool definitions', tokens: 12 },
    ]);
  });

  it('U7: zero rows are omitted and there is no reply reservation row', () => {
    const parts = usageParts(bucketMessages([{ role: 'user', content: 'hi' }], chars, 0, 4096));
    expect(parts).toEqual([{ label: 'History', tokens: 2 }]);
    expect(usageParts(bucketMessages([], chars, 0, 4096))).toEqual([]);
  });

  it('I15: control kinds never count as history messages', () => {
    const list = [
      { role: 'user' as const, content: 'a' },
      { role: 'system' as const, content: '', kind: 'event-marker' },
      { role: 'system' as const, content: 'stopped', metadata: { kind: 'turn-stopped' } },
      { role: 'assistant' as const, content: 'b' },
      { role: 'tool' as const, content: 'c', toolCallId: 'x' },
    ];
    expect(countConversationMessages(list)).toBe(3);
  });
});
