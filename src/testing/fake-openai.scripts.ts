// The scripts of a FakeOpenAiServer: what it answers to one chat-completions request.

/** Token usage as the wire reports it (`usage` of the last chunk or of the completion). */
export interface FakeUsage {
  /** Tokens of the prompt. */
  prompt_tokens: number;
  /** Tokens of the answer. */
  completion_tokens: number;
  /** @defaultValue the sum of the two parts */
  total_tokens?: number;
}

/** Fields every script may carry. */
export interface FakeScriptBase {
  /**
   * Hold the answer open: a streaming answer sends its first chunk (a non-streaming or error
   * answer sends nothing), then waits until `server.release()` or the client disconnects.
   */
  hold?: boolean;
}

/** A text answer, optionally preceded by reasoning (`reasoning_content`). */
export interface FakeTextScript extends FakeScriptBase {
  /**
   * Answer with one JSON completion even when the request asks for a stream, as a proxy that
   * ignores `stream: true` does.
   */
  ignoreStream?: boolean;
  /** The answer's text (`content`). */
  text: string;
  /** Number of content deltas the text is split into (capped at its length). @default 1 */
  chunks?: number;
  /** Reported usage; `null` sends none. @default { prompt_tokens: 10, completion_tokens: 5 } */
  usage?: FakeUsage | null;
  /** Reasoning sent as one `reasoning_content` delta before the text. */
  reasoning?: string;
}

/** One tool call of a {@link FakeToolCallsScript}. */
export interface FakeToolCall {
  /** The tool's name, as the model would call it. */
  name: string;
  /** An object is sent as its JSON; a string is sent as is. */
  arguments: Record<string, unknown> | string;
  /** The call's id. @default `call_fake_<n>`, `n` its position in the script from 1 */
  id?: string;
}

/**
 * A tool-call answer (`finish_reason: 'tool_calls'`). When streamed, each call's first delta
 * carries id and name with empty arguments; the arguments follow in three deltas.
 */
export interface FakeToolCallsScript extends FakeScriptBase {
  /** The calls, in order (their `index` on the wire). */
  toolCalls: FakeToolCall[];
  /** As in {@link FakeTextScript}. */
  ignoreStream?: boolean;
  /** Text sent before the calls. */
  text?: string;
  /** As in {@link FakeTextScript}. */
  usage?: FakeUsage | null;
}

/**
 * An HTTP answer with a given status and body: an error, or a 200 that is not a stream (an
 * HTML login page with `headers: { 'content-type': 'text/html' }`, an empty body with `''`).
 */
export interface FakeErrorScript extends FakeScriptBase {
  /** The HTTP status, e.g. `429` or `500`. */
  status: number;
  /** JSON body (a string is sent as is). @default an OpenAI-style `{ error: { message, ... } }` */
  body?: unknown;
  /** Sent over the default `content-type: application/json`. */
  headers?: Record<string, string>;
}

/**
 * Wire faults of a streaming answer, each one a way a real endpoint or proxy misbehaves:
 *
 * - `hang-before-headers`: reads the request, never answers;
 * - `headers-then-silence`: sends `200 text/event-stream` headers, then nothing;
 * - `hang-mid-stream`: sends the first chunk of `text`, then nothing;
 * - `keep-alive-only`: sends headers and an SSE comment `: ping` every `pingEveryMs`, never data;
 * - `disconnect-mid-stream`: sends the first chunk of `text`, then destroys the socket;
 * - `no-done`: sends the whole answer, finish reason included, and closes without `[DONE]`;
 * - `cut-without-finish`: sends the first chunk of `text` and closes cleanly, no finish, no `[DONE]`;
 * - `trickle`: sends a one-word delta every `pingEveryMs`, never finishing (a slow model that is
 *   never silent long enough for the idle timeout).
 *
 * A fault is streamed whether or not the request asks for a stream. Silent faults last until
 * the client goes away or the server closes (they count in `heldCount`, and `release()` does
 * not end them); `hold` has no effect on a fault.
 */
export interface FakeFaultScript extends FakeScriptBase {
  /** Which fault (see above). */
  fault:
    | 'hang-before-headers'
    | 'headers-then-silence'
    | 'hang-mid-stream'
    | 'keep-alive-only'
    | 'disconnect-mid-stream'
    | 'no-done'
    | 'cut-without-finish'
    | 'trickle';
  /** The answer the fault breaks off; sent in `chunks` deltas. @default 'Hello there' in 2 */
  text?: string;
  /** Number of deltas `text` is split into. @default 2 */
  chunks?: number;
  /** `keep-alive-only`, `trickle`: milliseconds between comments or deltas. @default 50 */
  pingEveryMs?: number;
}

/**
 * Exact SSE `data:` payloads, such as fixture lines. Each is sent as `data: <line>\n\n`, then
 * `data: [DONE]\n\n` unless the last line is `[DONE]`. A non-streaming request gets one
 * completion assembled from the lines.
 */
export interface FakeRawScript extends FakeScriptBase {
  /** The `data:` payloads: chunk JSON texts, and optionally a last `[DONE]`. */
  raw: string[];
}

/** What the server answers to one chat-completions request. */
export type FakeScript =
  FakeTextScript | FakeToolCallsScript | FakeErrorScript | FakeRawScript | FakeFaultScript;
