import type { FeedItem } from '../../../../src/api/replay/turn-feed';
import { UiMessageEncoder } from '../../../../src/api/ui-chat/ui-message.encoder';
import { parseStreamEventId, streamEventId } from '../../../../src/api/replay/turn-stream';

const sessionId = 's';
const turnId = 't';
let seq = 0;
const start = (): FeedItem => ({
  name: 'agent:turn:start',
  event: { sessionId, turnId, inputs: [], seq: ++seq },
});
const delta = (text: string): FeedItem => ({
  name: 'outbound:stream',
  event: { sessionId, turnId, delta: text, seq: ++seq },
});
const thinking = (text: string): FeedItem => ({
  name: 'outbound:stream',
  event: { sessionId, turnId, reasoningDelta: text, seq: ++seq },
});
const tool = (phase: 'start' | 'end', ok?: boolean): FeedItem => ({
  name: 'tool:execute',
  event: {
    sessionId,
    turnId,
    callId: 'c1',
    name: 'lookup',
    phase,
    args: { q: 1 },
    ok,
    result: 'r',
    seq: ++seq,
  },
});
const end = (outcome: 'replied' | 'error' | 'aborted', error?: string): FeedItem => ({
  name: 'agent:turn:end',
  event: { sessionId, turnId, outcome, error, seq: ++seq },
});

function typesOf(encoder: UiMessageEncoder, items: FeedItem[]): string[] {
  return items.flatMap((item) => encoder.encode(item).map((c) => c.type));
}

describe('UiMessageEncoder', () => {
  it('steps around model calls: a new step when text follows tool results', () => {
    const types = typesOf(new UiMessageEncoder(turnId), [
      start(),
      thinking('hm'),
      tool('start'),
      tool('end', true),
      delta('a'),
      delta('b'),
      end('replied'),
    ]);
    expect(types).toEqual([
      'data-turn',
      'start-step',
      'reasoning-start',
      'reasoning-delta',
      'reasoning-end',
      'tool-input-available',
      'tool-output-available',
      'finish-step',
      'start-step',
      'text-start',
      'text-delta',
      'text-delta',
      'text-end',
      'finish-step',
      'data-turn',
    ]);
  });

  it('a failed tool is tool-output-error; a failed turn ends with error, a stopped one with abort', () => {
    const encoder = new UiMessageEncoder(turnId);
    const chunks = [
      start(),
      tool('start'),
      tool('end', false),
      end('error', '[system] no model'),
    ].flatMap((item) => encoder.encode(item));
    expect(chunks).toContainEqual({ type: 'tool-output-error', toolCallId: 'c1', errorText: 'r' });
    expect(chunks.at(-1)).toEqual({ type: 'error', errorText: '[system] no model' });
    expect(typesOf(new UiMessageEncoder(turnId), [end('aborted')]).at(-1)).toBe('abort');
  });

  it('starting mid-turn opens what it needs (a step, a text part, the tool input)', () => {
    expect(typesOf(new UiMessageEncoder(turnId), [delta('x')])).toEqual([
      'start-step',
      'text-start',
      'text-delta',
    ]);
    expect(typesOf(new UiMessageEncoder(turnId), [tool('end', true)])).toEqual([
      'start-step',
      'tool-input-available',
      'tool-output-available',
    ]);
  });

  it("ignores other turns' events and the waiting list", () => {
    const other: FeedItem = {
      name: 'outbound:stream',
      event: { sessionId, turnId: 'other', delta: 'x', seq: 1 },
    };
    const queue: FeedItem = { name: 'agent:queue', event: { sessionId, waiting: [] } };
    expect(typesOf(new UiMessageEncoder(turnId), [other, queue])).toEqual([]);
  });

  it('SSE ids are <turnId>:<seq>, read back; anything else is not one', () => {
    expect(parseStreamEventId(streamEventId('a:b', 12))).toEqual({ turnId: 'a:b', seq: 12 });
    expect(parseStreamEventId('12')).toBeUndefined();
    expect(parseStreamEventId(undefined)).toBeUndefined();
  });
});
