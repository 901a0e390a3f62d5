import { ControlKinds, type Message, type ModelMessage } from '../contracts';

/**
 * Drops orphan tool calls from history before it is sent: a tool result that does not follow
 * its call, and an assistant tool call whose results are not all there (with the results it
 * has). Everything else passes through in order. Returns the kept messages.
 */
export function sanitiseToolGroups<T extends Pick<Message, 'role' | 'toolCalls' | 'toolCallId'>>(
  messages: readonly T[],
): { kept: T[]; dropped: number } {
  const kept: T[] = [];
  let dropped = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message.role === 'tool') {
      dropped++;
      continue;
    }
    if (message.role !== 'assistant' || !message.toolCalls?.length) {
      kept.push(message);
      continue;
    }
    const expected = new Set(message.toolCalls.map((c) => c.id));
    const results: T[] = [];
    let j = i + 1;
    while (j < messages.length && messages[j].role === 'tool') {
      const id = messages[j].toolCallId;
      if (id === undefined || !expected.has(id)) break;
      expected.delete(id);
      results.push(messages[j]);
      j++;
    }
    if (expected.size === 0) kept.push(message, ...results);
    else dropped += 1 + results.length;
    i = j - 1;
  }
  return { kept, dropped };
}

/**
 * History as the model sees it: event markers are left out; stop markers (P5) are kept as
 * system notes (they tell the next model that inputs went unanswered); everything else keeps its
 * role and content. `metadata.kind` carries the stored kind for the usage buckets.
 */
export function historyToModelMessages(history: readonly Message[]): ModelMessage[] {
  const visible = history.filter((m) => m.kind !== ControlKinds.EventMarker);
  return sanitiseToolGroups(visible).kept.map((m) => {
    const out: ModelMessage = { role: m.role, content: m.content, metadata: { historyId: m.id } };
    if (m.kind) out.metadata!.kind = m.kind;
    if (m.metadata.tokenCount) out.metadata!.tokenCount = m.metadata.tokenCount;
    if (m.toolCalls?.length) out.toolCalls = m.toolCalls;
    if (m.toolCallId) out.toolCallId = m.toolCallId;
    if (m.reasoningContent) out.reasoningContent = m.reasoningContent;
    return out;
  });
}
