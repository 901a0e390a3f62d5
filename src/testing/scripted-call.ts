import type { ChatRequest } from '../contracts';

/**
 * What a {@link ScriptedCall} answers with: text, or tool calls (with optional text before
 * them). Tool call ids are made up by the provider (`scripted_call_<n>`); omitted arguments
 * are sent as `{}`.
 */
export type ScriptedAnswer =
  | { text: string }
  | { text?: string; toolCalls: { name: string; arguments?: Record<string, unknown> }[] };

/**
 * The error a {@link ScriptedCall} rejects with when its request's signal aborts: named
 * `AbortError`, as `fetch` names its own.
 */
export class ScriptedAbortError extends Error {
  constructor() {
    super('The scripted model call was aborted');
    this.name = 'AbortError';
  }
}

/** How a {@link ScriptedCall} ended: with an answer, or with an error (failed or aborted). */
export type ScriptedOutcome = { answer: ScriptedAnswer } | { error: Error };

/**
 * One model call to a {@link ScriptedProvider}, held until the test answers it (`answer`),
 * fails it (`fail`) or the request's signal aborts. `marker` is the content of the last user
 * message of the request (tests put the session or input name there to tell calls apart).
 */
export class ScriptedCall {
  /** `open` until the call is settled once: answered, failed or aborted. */
  state: 'open' | 'answered' | 'failed' | 'aborted' = 'open';
  private settle!: (outcome: ScriptedOutcome) => void;
  /** Resolves with the answer or the error, whichever the call ends with. */
  readonly outcome = new Promise<ScriptedOutcome>((resolve) => (this.settle = resolve));

  /**
   * @param index - the call's position among the provider's calls, from 0.
   * @param request - the request the agent made.
   */
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

  /** The content of the last user message sent (`''` when there is none). */
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

  /** Makes the call fail with `error` (no-op once it is settled); returns whether it was open. */
  fail(error: Error): boolean {
    if (this.state !== 'open') return false;
    this.state = 'failed';
    this.settle({ error });
    return true;
  }
}
