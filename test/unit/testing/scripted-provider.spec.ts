import type { ChatRequest, ChatStreamChunk } from '../../../src/contracts';
import { ScriptedAbortError, ScriptedProvider } from '../../../src/testing';

const toolDefinition = { name: 'clock', description: 'Tells the time', parameters: {} };

/** A request whose last user message is `marker`. */
function request(marker: string, signal = new AbortController().signal): ChatRequest {
  return {
    model: 'scripted-model',
    messages: [
      { role: 'user', content: 'earlier' },
      { role: 'user', content: marker },
    ],
    signal,
  };
}

/** Reads a stream to its end, or to its error. */
async function drain(stream: AsyncIterable<ChatStreamChunk>) {
  const chunks: ChatStreamChunk[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk);
    return { chunks };
  } catch (error) {
    return { chunks, error };
  }
}

describe('ScriptedProvider (nest-agent-orchestrator/testing)', () => {
  let provider: ScriptedProvider;

  beforeEach(() => (provider = new ScriptedProvider()));

  it('hands out calls in arrival order, made before or after nextCall() is awaited', async () => {
    const a = drain(provider.stream(request('a')));
    const b = drain(provider.stream(request('b')));
    const waiting = provider.nextCall().then((call) => call.marker);
    const waitingToo = provider.nextCall().then((call) => call.marker);
    const later = provider.nextCall();
    const c = drain(provider.stream({ ...request('c'), tools: [toolDefinition] }));
    const third = await later;

    expect([await waiting, await waitingToo, third.marker]).toEqual(['a', 'b', 'c']);
    expect(provider.calls.map((call) => [call.index, call.offersTools])).toEqual([
      [0, false],
      [1, false],
      [2, true],
    ]);
    expect(provider.open()).toHaveLength(3);

    for (const call of [...provider.calls].reverse()) call.answer({ text: call.marker });
    expect((await Promise.all([a, b, c])).map((r) => r.chunks[0])).toEqual([
      { contentDelta: 'a' },
      { contentDelta: 'b' },
      { contentDelta: 'c' },
    ]);
  });

  it('streams an answer as text, then whole tool calls, then usage', async () => {
    const stream = drain(provider.stream(request('x')));
    const call = await provider.nextCall();

    expect(
      call.answer({
        text: 'Looking.',
        toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }, { name: 'clock' }],
      }),
    ).toBe(true);

    expect(await stream).toEqual({
      chunks: [
        { contentDelta: 'Looking.' },
        {
          toolCalls: [
            {
              id: 'scripted_call_1',
              type: 'function',
              function: { name: 'order_status', arguments: '{"orderId":"42"}' },
            },
            {
              id: 'scripted_call_2',
              type: 'function',
              function: { name: 'clock', arguments: '{}' },
            },
          ],
        },
        { usage: { promptTokens: 10, completionTokens: 5 } },
      ],
    });
    expect(call.state).toBe('answered');
    expect(call.answer({ text: 'again' })).toBe(false);
  });

  it('chat() gathers the same answer into one response', async () => {
    const response = provider.chat(request('x'));
    (await provider.nextCall()).answer({ toolCalls: [{ name: 'clock' }] });

    expect(await response).toEqual({
      content: '',
      toolCalls: [
        { id: 'scripted_call_1', type: 'function', function: { name: 'clock', arguments: '{}' } },
      ],
      usage: { promptTokens: 10, completionTokens: 5 },
    });
  });

  it('a failed call throws its error; an aborted one a ScriptedAbortError, at once', async () => {
    const controller = new AbortController();
    const failing = drain(provider.stream(request('fail')));
    const aborted = drain(provider.stream(request('abort', controller.signal)));
    const [first, second] = [await provider.nextCall(), await provider.nextCall()];

    const boom = new Error('model down');
    expect(first.fail(boom)).toBe(true);
    controller.abort();

    expect(await failing).toEqual({ chunks: [], error: boom });
    const { error } = await aborted;
    expect(error).toBeInstanceOf(ScriptedAbortError);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect([first.state, second.state]).toEqual(['failed', 'aborted']);
    expect(second.answer({ text: 'late' })).toBe(false);
    expect(provider.open()).toEqual([]);
  });

  it('a request aborted before the call is aborted from the start', async () => {
    const controller = new AbortController();
    controller.abort();

    const { error } = await drain(provider.stream(request('x', controller.signal)));

    expect(error).toBeInstanceOf(ScriptedAbortError);
    expect(provider.calls[0].state).toBe('aborted');
  });

  it('reset() fails the open calls and starts the order again', async () => {
    const open = drain(provider.stream(request('old')));
    await provider.nextCall();

    provider.reset();
    const { error } = await open;
    const fresh = drain(provider.stream(request('new')));
    const call = await provider.nextCall();
    call.answer({ text: 'fresh' });

    expect(error).toEqual(new Error('reset'));
    expect([call.index, call.marker, provider.calls.length]).toEqual([0, 'new', 1]);
    expect((await fresh).chunks[0]).toEqual({ contentDelta: 'fresh' });
  });

  it('serves every model with the same capabilities', () => {
    expect([provider.id, provider.defaultModel]).toEqual(['scripted', 'scripted-model']);
    expect(provider.capabilities('any-model')).toEqual({
      contextWindow: 128_000,
      maxOutputTokens: 1024,
      vision: false,
      tools: true,
    });
  });
});
