import type {
  ChatRequest,
  ChatStreamChunk,
  ModelMessage,
  ToolCallContext,
} from '../../../../src/contracts';
import { clockTool, DEMO_LABEL, DemoProvider } from '../../../../src/llm/demo/demo.provider';

async function collect(stream: AsyncIterable<ChatStreamChunk>) {
  const chunks: ChatStreamChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return {
    chunks,
    text: chunks.map((c) => c.contentDelta ?? '').join(''),
    toolCalls: chunks.find((c) => c.toolCalls)?.toolCalls,
    usage: chunks.find((c) => c.usage)?.usage,
  };
}

const clockDefinition = {
  name: clockTool.name,
  description: clockTool.description,
  parameters: clockTool.parameters,
};

function request(messages: ModelMessage[], extra: Partial<ChatRequest> = {}): ChatRequest {
  return { model: 'demo', messages, signal: new AbortController().signal, ...extra };
}

const user = (content: string): ModelMessage => ({ role: 'user', content });

describe('DemoProvider', () => {
  const demo = new DemoProvider({ wordDelayMs: 0 });

  it('serves only the model "demo", with tools and no vision', () => {
    expect(demo.id).toBe('demo');
    expect(demo.defaultModel).toBe('demo');
    expect(demo.capabilities('demo')).toMatchObject({ tools: true, vision: false });
    expect(demo.capabilities('gpt-4o')).toBeUndefined();
  });

  it('labels every reply and streams it word by word', async () => {
    const got = await collect(demo.stream(request([user('Tell me about penguins')])));

    expect(got.text.startsWith(`${DEMO_LABEL} `)).toBe(true);
    expect(got.text).toContain('You said: "Tell me about penguins"');
    expect(got.text).toContain('LLM_BASE_URL');
    expect(got.chunks.filter((c) => c.contentDelta).length).toBeGreaterThan(5);
    expect(got.chunks.at(-1)?.usage).toMatchObject({ promptTokens: expect.any(Number) });
  });

  it('greets with what it is and how to configure a real model', async () => {
    const response = await demo.chat(request([user('hello')]));

    expect(response.content).toMatch(/^\[demo model\] Hello! I am the built-in offline demo model/);
    expect(response.content).toContain('set LLM_BASE_URL');
  });

  it('waits between words with a timer (fake timers)', async () => {
    jest.useFakeTimers();
    try {
      const slow = new DemoProvider({ wordDelayMs: 1000 });
      const iterator = slow.stream(request([user('one two three')]))[Symbol.asyncIterator]();

      expect((await iterator.next()).value).toEqual({ contentDelta: '[demo ' });
      const next = iterator.next();
      await jest.advanceTimersByTimeAsync(999);
      let settled = false;
      void next.then(() => (settled = true));
      await Promise.resolve();
      expect(settled).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect((await next).value).toEqual({ contentDelta: 'model] ' });
      await iterator.return(undefined);
    } finally {
      jest.useRealTimers();
    }
  });

  it('stops streaming when aborted', async () => {
    const controller = new AbortController();
    const slow = new DemoProvider({ wordDelayMs: 5 });
    const iterator = slow
      .stream(request([user('a b c d e f g')], { signal: controller.signal }))
      [Symbol.asyncIterator]();
    await iterator.next();

    controller.abort();

    await expect(iterator.next()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('asks the clock tool for the time, then answers with its result', async () => {
    const tools = [clockDefinition];
    const first = await collect(demo.stream(request([user('What time is it?')], { tools })));

    expect(first.text).toBe(`${DEMO_LABEL} Let me ask the clock tool.`);
    expect(first.toolCalls).toEqual([
      {
        id: expect.stringMatching(/^demo_call_\d+$/),
        type: 'function',
        function: { name: 'clock', arguments: '{}' },
      },
    ]);
    const result = await clockTool.handler({}, {} as ToolCallContext);
    const messages: ModelMessage[] = [
      user('What time is it?'),
      { role: 'assistant', content: first.text, toolCalls: first.toolCalls },
      { role: 'tool', content: JSON.stringify(result), toolCallId: first.toolCalls![0].id },
    ];

    const second = await collect(demo.stream(request(messages, { tools })));

    expect(second.toolCalls).toBeUndefined();
    expect(second.text).toContain(`${DEMO_LABEL} The clock tool says it is`);
    expect(second.text).toContain((result as { iso: string }).iso);
  });

  it('understands 几点 too, and tells the server time when no clock tool is offered', async () => {
    const asked = await demo.chat(request([user('现在几点?')], { tools: [clockDefinition] }));
    const without = await demo.chat(request([user('what time is it')]));

    expect(asked.toolCalls?.[0].function.name).toBe('clock');
    expect(without.toolCalls).toBeUndefined();
    expect(without.content).toMatch(/^\[demo model\] The clock tool is not registered/);
  });
});

describe('clockTool', () => {
  it('returns the ISO time and the time zone', async () => {
    const result = (await clockTool.handler({}, {} as ToolCallContext)) as Record<string, string>;

    expect(Date.parse(result.iso)).not.toBeNaN();
    expect(result.timeZone).toEqual(expect.any(String));
    expect(result.local).toEqual(expect.any(String));
  });

  it('answers in a given time zone and rejects unknown ones', async () => {
    const tokyo = (await clockTool.handler({ timeZone: 'Asia/Tokyo' }, {} as ToolCallContext)) as {
      timeZone: string;
    };
    const bad = await clockTool.handler({ timeZone: 'Mars/Olympus' }, {} as ToolCallContext);

    expect(tokyo.timeZone).toBe('Asia/Tokyo');
    expect(bad).toEqual({ error: expect.stringContaining('Unknown time zone "Mars/Olympus"') });
  });
});
