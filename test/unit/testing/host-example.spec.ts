import { Injectable } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test, type TestingModule } from '@nestjs/testing';
import { AgentModule, AgentService, AgentTool, OpenAiCompatibleProvider } from '../../../src';
import { FakeOpenAiServer, ScriptedProvider } from '../../../src/testing';

/**
 * The "Testing helpers" examples of README.md, as a host writes them (imports from the package
 * there, from src here): they must stay true, so they run.
 */

@Injectable()
class OrderTools {
  @AgentTool({
    name: 'order_status',
    description: 'Looks up the status of an order',
    parameters: {
      type: 'object',
      properties: { orderId: { type: 'string' } },
      required: ['orderId'],
    },
  })
  async orderStatus(args: { orderId: string }) {
    return { orderId: args.orderId, status: 'shipped' };
  }
}

describe('README "Testing helpers": a host e2e test against the fake server', () => {
  let server: FakeOpenAiServer;
  let app: TestingModule;
  let agent: AgentService;

  beforeAll(async () => {
    server = await FakeOpenAiServer.start();
    app = await Test.createTestingModule({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentModule.forRoot({
          llmProvider: new OpenAiCompatibleProvider({
            baseURL: server.url,
            defaultModel: 'fake-model',
            maxRetries: 0,
          }),
        }),
      ],
      providers: [OrderTools],
    }).compile();
    await app.init();
    agent = app.get(AgentService);
  });

  afterAll(async () => {
    await app.close();
    await server.close();
  });

  it('looks the order up with the tool, then answers', async () => {
    server.enqueue(
      { toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] },
      { text: 'Order 42 has shipped.' },
    );

    const settled = await agent.handleMessage({
      sessionId: 'chat-1',
      content: 'Where is order 42?',
    });

    expect(settled).toMatchObject({
      settled: 'turn',
      outcome: 'replied',
      reply: 'Order 42 has shipped.',
    });
    const [first, second] = server.requests;
    expect(first.tools.map((t: any) => t.function.name)).toEqual(['order_status']);
    expect(second.messages.at(-1)).toMatchObject({
      role: 'tool',
      content: JSON.stringify({ orderId: '42', status: 'shipped' }),
    });
  });
});

describe('README "Testing helpers": the in-process ScriptedProvider', () => {
  it('the test answers each model call when it likes', async () => {
    const provider = new ScriptedProvider();
    const app = await Test.createTestingModule({
      imports: [
        EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
        AgentModule.forRoot({ llmProvider: provider }),
      ],
      providers: [OrderTools],
    }).compile();
    await app.init();
    const agent = app.get(AgentService);

    const settled = agent.handleMessage({ sessionId: 'chat-1', content: 'Where is order 42?' });
    const first = await provider.nextCall();
    expect(first.marker).toBe('Where is order 42?');
    first.answer({ toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] });
    (await provider.nextCall()).answer({ text: 'It has shipped.' });

    expect(await settled).toMatchObject({ outcome: 'replied', reply: 'It has shipped.' });
    expect(provider.calls[1].request.messages.at(-1)).toMatchObject({ role: 'tool' });
    await app.close();
  });
});
