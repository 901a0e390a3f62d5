import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ModelCapabilities,
  ToolCall,
} from '../../src';

/** What a held call answers with: text, or tool calls (with optional text before them). */
export type ScriptedAnswer =
  | { text: string }
  | { text?: string; toolCalls: { name: string; arguments?: Record<string, unknown> }[] };

/** The error a call rejects with when its request's signal aborts. */
export class ScriptedAbortError extends Error {
  constructor() {
    super('The scripted model call was aborted');
    this.name = 'AbortError';
  }
}

/**
 * One model call, held until the test answers it. `marker` is the content of the last user
 * message of the request (tests put the session or input name there to tell calls apart).
 */
export class ScriptedCall {
  /** Settled once: answered, failed or aborted. */
  state: 'open' | 'answered' | 'failed' | 'aborted' = 'open';
  private settle!: (outcome: { answer: ScriptedAnswer } | { error: Error }) => void;
  /** Resolves with the answer or the error, whichever the call ends with. */
  readonly outcome = new Promise<{ answer: ScriptedAnswer } | { error: Error }>(
    (resolve) => (this.settle = resolve),
  );

  constructor(
    readonly index: number,
    readonly request: ChatRequest,
  ) {
    const onAbort = () => {
      if (this.state !== 'open') return;
      this.state = 'aborted';
      this.settle({ error: new ScriptedAbortError() });
    };
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener('abort', onAbort, { once: true });
  }

  /** The content of the last user message sent. */
  get marker(): string {
    const users = this.request.messages.filter((m) => m.role === 'user');
    return users[users.length - 1]?.content ?? '';
  }

  /** Whether tools were offered to this call. */
  get offersTools(): boolean {
    return !!this.request.tools?.length;
  }

  /** Answers the call (no-op once it is settled); returns whether it was still open. */
  answer(answer: ScriptedAnswer): boolean {
    if (this.state !== 'open') return false;
    this.state = 'answered';
    this.settle({ answer });
    return true;
  }

  /** Makes the call fail with `error` (no-op once it is settled). */
  fail(error: Error): boolean {
    if (this.state !== 'open') return false;
    this.state = 'failed';
    this.settle({ error });
    return true;
  }
}

/**
 * An in-process `LlmProvider` whose every call is held until the test answers it, for
 * deterministic property tests: no network, no timers. Calls are registered in arrival order
 * (`calls`, `nextCall()`, `open()`); an aborted request signal rejects the call at once.
 */
export class ScriptedProvider implements LlmProvider {
  readonly id = 'scripted';
  readonly defaultModel = 'scripted-model';
  /** Every call, in arrival order. */
  readonly calls: ScriptedCall[] = [];
  private handedOut = 0;
  private readonly waiters: ((call: ScriptedCall) => void)[] = [];
  private toolCallIds = 0;

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
  }

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
