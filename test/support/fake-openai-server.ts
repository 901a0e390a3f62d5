import type { Server, ServerResponse } from 'node:http';
import {
  listenLocal,
  ScriptedHttpServer,
  sendJson,
  split,
  type ReceivedHttpRequest,
} from './fake-http';

/** Token usage as the wire reports it; `total_tokens` defaults to the sum of the two parts. */
export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
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
  name: string;
  /** An object is sent as its JSON; a string is sent as is. */
  arguments: Record<string, unknown> | string;
  /** @default `call_fake_<n>` */
  id?: string;
}

/**
 * A tool-call answer (`finish_reason: 'tool_calls'`). When streamed, each call's first delta
 * carries id and name with empty arguments; the arguments follow in three deltas.
 */
export interface FakeToolCallsScript extends FakeScriptBase {
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
 * Silent faults last until the client goes away or the server closes.
 */
export interface FakeFaultScript extends FakeScriptBase {
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
  raw: string[];
}

/** What the server answers to one chat-completions request. */
export type FakeScript =
  FakeTextScript | FakeToolCallsScript | FakeErrorScript | FakeRawScript | FakeFaultScript;

/** A request as the server received it. */
export type ReceivedRequest = ReceivedHttpRequest;

const DEFAULT_USAGE: FakeUsage = { prompt_tokens: 10, completion_tokens: 5 };
const BASE_PATH = '/v1';

/**
 * A real local HTTP server speaking the OpenAI chat-completions wire format, for tests.
 *
 * Each `POST /v1/chat/completions` takes the oldest queued script (a text reply `"ok"` when none
 * is queued) and answers it as SSE when the body has `stream: true` (a usage chunk only when
 * `stream_options.include_usage` is set), else as one JSON completion. `GET /v1/models` lists
 * `models`. The SDK retries 408/409/429/5xx answers: give clients `maxRetries: 0` when testing
 * errors, or queue one script per attempt (and `discardScripts()` those left over).
 * {@link FakeFaultScript}s break the wire in the ways real endpoints do.
 */
export class FakeOpenAiServer extends ScriptedHttpServer<FakeScript> {
  /** Model ids listed by `GET /v1/models`. */
  models: string[] = ['fake-model'];

  private constructor(server: Server) {
    super(server, (message) => ({ error: { message, type: 'fake_server_error' } }));
  }

  /** Starts a server on a free port of 127.0.0.1. */
  static async start(): Promise<FakeOpenAiServer> {
    return new FakeOpenAiServer(await listenLocal());
  }

  /** Base URL for an OpenAI client, ending in `/v1`. */
  get url(): string {
    return `${this.origin}${BASE_PATH}`;
  }

  protected isModelCall(request: ReceivedHttpRequest): boolean {
    return request.method === 'POST' && request.path === `${BASE_PATH}/chat/completions`;
  }

  protected answerOther(request: ReceivedHttpRequest, res: ServerResponse): void {
    if (request.method === 'GET' && request.path === `${BASE_PATH}/models`) {
      const data = this.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fake' }));
      return sendJson(res, 200, { object: 'list', data });
    }
    sendJson(res, 404, { error: { message: `No route ${request.method} ${request.path}` } });
  }

  /** Answers one chat-completions request from the next script. Holds synchronously. */
  protected async answer(body: any, res: ServerResponse): Promise<void> {
    const script = this.nextScript({ text: 'ok' });
    const id = `chatcmpl-fake-${++this.sequence}`;
    if ('status' in script) {
      if (script.hold) await this.hold(res);
      if (!this.closing && !res.destroyed) sendError(res, script);
      return;
    }
    if ('fault' in script) return this.fault(script, body, id, res);
    if (body.stream !== true || ('raw' in script ? false : script.ignoreStream)) {
      if (script.hold) await this.hold(res);
      if (!this.closing && !res.destroyed) sendJson(res, 200, completionOf(script, body, id));
      return;
    }
    const events = streamEventsOf(script, body, id);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`data: ${events[0]}\n\n`);
    if (script.hold) await this.hold(res);
    if (this.closing || res.destroyed) return;
    for (const event of events.slice(1)) res.write(`data: ${event}\n\n`);
    res.end();
  }

  /** Answers with a wire fault (see {@link FakeFaultScript}). */
  private async fault(script: FakeFaultScript, body: any, id: string, res: ServerResponse) {
    const answer: FakeTextScript = {
      text: script.text ?? 'Hello there',
      chunks: script.chunks ?? 2,
    };
    const events = streamEventsOf(answer, body, id);
    const sse = (payload: string) => `data: ${payload}\n\n`;
    if (script.fault === 'hang-before-headers') return this.hold(res);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    switch (script.fault) {
      case 'headers-then-silence':
        return this.hold(res);
      case 'keep-alive-only': {
        const ping = setInterval(() => res.write(': ping\n\n'), script.pingEveryMs ?? 50);
        res.on('close', () => clearInterval(ping));
        return this.hold(res);
      }
      case 'hang-mid-stream':
        res.write(sse(events[0]));
        return this.hold(res);
      case 'trickle': {
        const delta = JSON.stringify({
          id,
          object: 'chat.completion.chunk',
          created: 0,
          model: body.model,
          choices: [{ index: 0, delta: { content: 'slow ' }, finish_reason: null }],
        });
        const drip = setInterval(() => res.write(sse(delta)), script.pingEveryMs ?? 50);
        res.on('close', () => clearInterval(drip));
        return this.hold(res);
      }
      case 'disconnect-mid-stream':
        res.write(sse(events[0]), () => res.socket?.destroy());
        return;
      case 'cut-without-finish':
        res.end(sse(events[0]));
        return;
      case 'no-done':
        res.end(
          events
            .filter((event) => event !== '[DONE]')
            .map(sse)
            .join(''),
        );
        return;
    }
  }
}

/** Reads a request and parses its body. */
function sendError(res: ServerResponse, script: FakeErrorScript): void {
  const body = script.body ?? {
    error: { message: `Fake error ${script.status}`, type: 'fake_error', param: null, code: null },
  };
  res.writeHead(script.status, { 'content-type': 'application/json', ...script.headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** The SSE `data:` payloads of a streamed answer, `[DONE]` included. */
function streamEventsOf(
  script: FakeTextScript | FakeToolCallsScript | FakeRawScript,
  body: any,
  id: string,
): string[] {
  if ('raw' in script) {
    return script.raw.at(-1) === '[DONE]' ? [...script.raw] : [...script.raw, '[DONE]'];
  }
  const envelope = (choices: unknown[], usage?: unknown): string =>
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? 'fake-model',
      choices,
      ...(usage ? { usage } : {}),
    });
  const choice = (delta: unknown, finish: string | null = null) => ({
    index: 0,
    delta,
    finish_reason: finish,
    logprobs: null,
  });
  const deltas = deltasOf(script);
  deltas[0] = { role: 'assistant', ...(deltas[0] ?? { content: '' }) };
  const events = deltas.map((delta) => envelope([choice(delta)]));
  events.push(envelope([choice({}, 'toolCalls' in script ? 'tool_calls' : 'stop')]));
  const usage = usageOf(script);
  if (usage && body.stream_options?.include_usage) events.push(envelope([], usage));
  events.push('[DONE]');
  return events;
}

/** The deltas of a text or tool-call script, in order (reasoning, text, tool calls). */
function deltasOf(script: FakeTextScript | FakeToolCallsScript): Record<string, unknown>[] {
  const deltas: Record<string, unknown>[] = [];
  if ('reasoning' in script && script.reasoning) {
    deltas.push({ content: null, reasoning_content: script.reasoning });
  }
  const chunks = 'chunks' in script ? script.chunks : undefined;
  for (const piece of split(script.text ?? '', chunks ?? 1)) deltas.push({ content: piece });
  if ('toolCalls' in script) {
    toolCallsOf(script).forEach((call, index) => {
      const { name } = call.function;
      deltas.push({
        tool_calls: [{ index, id: call.id, type: 'function', function: { name, arguments: '' } }],
      });
      for (const piece of split(call.function.arguments, 3)) {
        deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
      }
    });
  }
  return deltas;
}

/** The wire tool calls of a script (ids defaulted, arguments as JSON text). */
function toolCallsOf(script: FakeToolCallsScript) {
  return script.toolCalls.map((call, index) => ({
    id: call.id ?? `call_fake_${index + 1}`,
    type: 'function' as const,
    function: {
      name: call.name,
      arguments:
        typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    },
  }));
}

/** The wire usage of a script, or `undefined` when it reports none. */
function usageOf(script: FakeTextScript | FakeToolCallsScript): Required<FakeUsage> | undefined {
  const usage = script.usage === undefined ? DEFAULT_USAGE : script.usage;
  if (!usage) return undefined;
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

/** One non-streaming completion for a script. */
function completionOf(
  script: FakeTextScript | FakeToolCallsScript | FakeRawScript,
  body: any,
  id: string,
) {
  if ('raw' in script) return assembleRaw(script.raw, id);
  const toolCalls = 'toolCalls' in script ? toolCallsOf(script) : [];
  const reasoning = 'reasoning' in script ? script.reasoning : undefined;
  const message = {
    role: 'assistant',
    content: script.text ?? (toolCalls.length ? null : ''),
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const usage = usageOf(script);
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model ?? 'fake-model',
    choices: [
      {
        index: 0,
        message,
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
        logprobs: null,
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

/** A completion assembled from raw stream lines (string content and reasoning, tool calls). */
function assembleRaw(lines: string[], id: string) {
  let content = '';
  let reasoning = '';
  let usage: unknown;
  let model = 'fake-model';
  const calls = new Map<number, { id: string; type: 'function'; function: any }>();
  for (const line of lines) {
    if (line === '[DONE]') continue;
    const chunk = JSON.parse(line);
    model = chunk.model || model;
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices?.[0]?.delta ?? {};
    if (typeof delta.content === 'string') content += delta.content;
    const thought = delta.reasoning_content ?? delta.reasoning;
    if (typeof thought === 'string') reasoning += thought;
    (delta.tool_calls ?? []).forEach((d: any, position: number) => {
      const index = d.index ?? position;
      const call = calls.get(index) ?? {
        id: '',
        type: 'function',
        function: { name: '', arguments: '' },
      };
      calls.set(index, call);
      if (d.id) call.id = d.id;
      if (d.function?.name) call.function.name = d.function.name;
      call.function.arguments += d.function?.arguments ?? '';
    });
  }
  const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  const message = {
    role: 'assistant',
    content: content || (toolCalls.length ? null : ''),
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const finish = toolCalls.length ? 'tool_calls' : 'stop';
  const choices = [{ index: 0, message, finish_reason: finish, logprobs: null }];
  return { id, object: 'chat.completion', created: 0, model, choices, ...(usage ? { usage } : {}) };
}
