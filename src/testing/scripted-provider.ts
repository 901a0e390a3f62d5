import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ModelCapabilities,
  ToolCall,
} from '../contracts';
import { ScriptedAbortError, ScriptedCall } from './scripted-call';

/**
 * An in-process `LlmProvider` whose every call is held until the test answers it: no network,
 * no timers, so the test decides when each model call ends and how (deterministic tests of
 * concurrency, aborts, queues). Calls are registered in arrival order (`calls`, `nextCall()`,
 * `open()`); an aborted request signal rejects the call at once with a
 * {@link ScriptedAbortError}. Every answer reports usage `{ promptTokens: 10,
 * completionTokens: 5 }`; every model is served, with a 128,000-token window and tools.
 *
 * @example
 * ```ts
 * const provider = new ScriptedProvider();
 * // AgentModule.forRoot({ llmProvider: provider, ... })
 * const settled = agent.handleMessage({ sessionId: 'chat-1', content: 'Where is order 42?' });
 * const call = await provider.nextCall();
 * call.answer({ toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] });
 * (await provider.nextCall()).answer({ text: 'It has shipped.' });
 * await settled; // { settled: 'turn', outcome: 'replied', reply: 'It has shipped.', ... }
 * ```
 */
export class ScriptedProvider implements LlmProvider {
  /** The provider id, `scripted`. */
  readonly id = 'scripted';
  /** The model used when a request names none, `scripted-model`. */
  readonly defaultModel = 'scripted-model';
  /** Every call, in arrival order. */
  readonly calls: ScriptedCall[] = [];
  private handedOut = 0;
  private readonly waiters: ((call: ScriptedCall) => void)[] = [];
  private toolCallIds = 0;

  /** The same capabilities for every model: 128,000 tokens of context, 1024 out, tools. */
  capabilities(_model: string): ModelCapabilities {
    return { contextWindow: 128_000, maxOutputTokens: 1024, vision: false, tools: true };
  }

  /** Calls not answered, failed or aborted yet, oldest first. */
  open(): ScriptedCall[] {
    return this.calls.filter((c) => c.state === 'open');
  }

  /** The oldest call not yet handed out by `nextCall`, waiting for one when there is none. */
  nextCall(): Promise<ScriptedCall> {
    const call = this.calls[this.handedOut];
    if (call) {
      this.handedOut++;
      return Promise.resolve(call);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Forgets every call (for a fresh property-test run); open calls are failed first. */
  reset(): void {
    for (const call of this.open()) call.fail(new Error('reset'));
    this.calls.length = 0;
    this.handedOut = 0;
    this.toolCallIds = 0;
  }

  /** The whole answer of a call (registered and held as `stream` does). */
  async chat(request: ChatRequest): Promise<ChatResponse> {
    let content = '';
    let toolCalls: ToolCall[] | undefined;
    for await (const chunk of this.stream(request)) {
      content += chunk.contentDelta ?? '';
      if (chunk.toolCalls?.length) toolCalls = chunk.toolCalls;
    }
    return {
      content,
      ...(toolCalls ? { toolCalls } : {}),
      usage: { promptTokens: 10, completionTokens: 5 },
    };
  }

  /**
   * Registers a call and waits for the test to settle it, then streams its answer: the text
   * as one delta, the tool calls as one chunk, then usage. Throws the call's error.
   */
  async *stream(request: ChatRequest): AsyncIterable<ChatStreamChunk> {
    const call = new ScriptedCall(this.calls.length, request);
    this.calls.push(call);
    const waiter = this.waiters.shift();
    if (waiter) {
      this.handedOut++;
      waiter(call);
    }
    const outcome = await call.outcome;
    if ('error' in outcome) throw outcome.error;
    const { answer } = outcome;
    if (answer.text) yield { contentDelta: answer.text };
    if (request.signal.aborted) throw new ScriptedAbortError();
    if ('toolCalls' in answer && answer.toolCalls.length) {
      yield {
        toolCalls: answer.toolCalls.map((c) => ({
          id: `scripted_call_${++this.toolCallIds}`,
          type: 'function' as const,
          function: { name: c.name, arguments: JSON.stringify(c.arguments ?? {}) },
        })),
      };
    }
    yield { usage: { promptTokens: 10, completionTokens: 5 } };
  }
}
