import { MemoryMessageLog } from '../../../src/session-bridge';
import type { Message } from '../../../src/contracts';
import { HostHistoryStore } from '../../../bench/support/zero-latency';

/** The stored records without their token counts: what a host's store returns. */
const withoutCounts = (records: readonly Message[]) =>
  records.map(({ metadata: { tokenCount: _dropped, ...metadata }, ...rest }) => ({
    ...rest,
    metadata,
  }));

describe("the bench's host store (turn cost, issue 15)", () => {
  it('returns every stored field as fresh objects at every level, without token counts, and leaves the store as it was', async () => {
    const log = new MemoryMessageLog();
    const call = { id: 'c1', type: 'function' as const, function: { name: 'f', arguments: '{}' } };
    await log.append([
      {
        sessionId: 's',
        role: 'user',
        content: 'q',
        metadata: { turnId: 't', tokenCount: { o200k_base: 4 } },
        key: 'k1',
      },
      {
        sessionId: 's',
        role: 'assistant',
        content: '',
        toolCalls: [call],
        reasoningContent: 'r',
        metadata: { turnId: 't' },
      },
      {
        sessionId: 's',
        role: 'tool',
        content: '42',
        toolCallId: 'c1',
        kind: 'tool-result',
        metadata: { turnId: 't', tokenCount: { o200k_base: 5 } },
      },
    ]);
    const stored = await log.readonlyHistory('s');
    const host = new HostHistoryStore(log);

    const first = await host.history('s');
    const second = await host.history('s');

    expect(first).toEqual(withoutCounts(stored));
    expect(first.every((m) => !('tokenCount' in m.metadata))).toBe(true);
    first.forEach((message, i) => {
      expect(message).not.toBe(stored[i]);
      expect(message).not.toBe(second[i]);
      expect(message.metadata).not.toBe(second[i].metadata);
      expect(Object.isFrozen(message)).toBe(false);
    });
    expect(first[1].toolCalls![0]).not.toBe(stored[1].toolCalls![0]);
    expect(first[1].toolCalls![0].function).not.toBe(stored[1].toolCalls![0].function);
    expect((await log.readonlyHistory('s'))[0].metadata.tokenCount).toEqual({ o200k_base: 4 });
  });
});
