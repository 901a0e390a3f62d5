import type { Server, ServerResponse } from 'node:http';
import { listenLocal, ScriptedHttpServer, type ReceivedHttpRequest } from '../../src/testing';
import { sendJson, split } from '../../src/testing/http-plumbing';

/** Token usage as the Messages API reports it. */
export interface FakeAnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

/** Fields every script may carry. */
export interface FakeAnthropicScriptBase {
  /**
   * Hold the answer open: a streaming answer sends its first `holdAfter` events (a
   * non-streaming or error answer sends nothing), then waits until `server.release()` or the
   * client disconnects.
   */
  hold?: boolean;
  /** Streaming only: number of events sent before a `hold` starts. @default 1 */
  holdAfter?: number;
  /** Streaming only: destroy the socket after this many events (a connection reset). */
  destroyAfter?: number;
  /** Streaming only: end the response cleanly after this many events (no `message_stop`). */
  endAfter?: number;
}

/** A text answer, optionally preceded by a thinking block. */
export interface FakeAnthropicTextScript extends FakeAnthropicScriptBase {
  text: string;
  /** Number of `text_delta`s the text is split into (capped at its length). @default 1 */
  chunks?: number;
  /** Thinking sent as a `thinking` block (one `thinking_delta` and a signature) before the text. */
  thinking?: string;
  /** Reported usage; `null` sends none. @default { input_tokens: 10, output_tokens: 5 } */
  usage?: FakeAnthropicUsage | null;
  /** @default 'end_turn' */
  stopReason?: string;
}

/** One tool call of a {@link FakeAnthropicToolUseScript}. */
export interface FakeAnthropicToolCall {
  name: string;
  /** An object is sent as its JSON; a string is sent as is (it should be a JSON object). */
  arguments: Record<string, unknown> | string;
  /** @default `toolu_fake_<n>` */
  id?: string;
}

/**
 * A tool-use answer (`stop_reason: 'tool_use'`): optional thinking and text blocks, then one
 * `tool_use` block per call whose input JSON is streamed in `jsonChunks` `input_json_delta`s.
 */
export interface FakeAnthropicToolUseScript extends FakeAnthropicScriptBase {
  toolCalls: FakeAnthropicToolCall[];
  text?: string;
  thinking?: string;
  /** Number of `input_json_delta`s per call (split at arbitrary characters). @default 3 */
  jsonChunks?: number;
  usage?: FakeAnthropicUsage | null;
}

/** An HTTP error answer. */
export interface FakeAnthropicErrorScript extends FakeAnthropicScriptBase {
  status: number;
  /** JSON body (a string is sent as is). @default an Anthropic-style `{ type: 'error', error }` */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * Exact SSE `data:` payloads, such as fixture lines. Each line is sent as `event: <its type>`
 * and `data: <line>` (a line that is not JSON gets `event: <rawEvent>`, default `message_delta`,
 * so it reaches the client's parser). A non-streaming request gets one message assembled from
 * the lines.
 */
export interface FakeAnthropicRawScript extends FakeAnthropicScriptBase {
  raw: string[];
  /** Event name of lines that are not JSON. @default 'message_delta' */
  rawEvent?: string;
}

/** What the server answers to one Messages API request. */
export type FakeAnthropicScript =
  | FakeAnthropicTextScript
  | FakeAnthropicToolUseScript
  | FakeAnthropicErrorScript
  | FakeAnthropicRawScript;

/** A request as the server received it. */
export type ReceivedAnthropicRequest = ReceivedHttpRequest;

const DEFAULT_USAGE: FakeAnthropicUsage = { input_tokens: 10, output_tokens: 5 };
const MESSAGES_PATH = '/v1/messages';

/** One SSE event: its name and its `data:` payload. */
interface SseEvent {
  event: string;
  data: string;
}

/**
 * A real local HTTP server speaking the Anthropic Messages API wire format, for tests.
 *
 * Each `POST /v1/messages` takes the oldest queued script (a text reply `"ok"` when none is
 * queued) and answers it as SSE (`event:` and `data:` lines) when the body has `stream: true`,
 * else as one JSON message. `GET /v1/models` lists `models`. Give clients `maxRetries: 0` when
 * testing retryable errors, or queue one script per attempt.
 */
export class FakeAnthropicServer extends ScriptedHttpServer<FakeAnthropicScript> {
  /** Model ids listed by `GET /v1/models`. */
  models: string[] = ['claude-fake-4'];

  private constructor(server: Server) {
    super(server, (message) => errorBody('api_error', message));
  }

  /** Starts a server on a free port of 127.0.0.1. */
  static async start(): Promise<FakeAnthropicServer> {
    return new FakeAnthropicServer(await listenLocal());
  }

  /** Base URL for an Anthropic client (the API root, without `/v1`). */
  get url(): string {
    return this.origin;
  }

  protected isModelCall(request: ReceivedHttpRequest): boolean {
    return request.method === 'POST' && request.path === MESSAGES_PATH;
  }

  protected answerOther(request: ReceivedHttpRequest, res: ServerResponse): void {
    if (request.method === 'GET' && request.path === '/v1/models') {
      const data = this.models.map((id) => ({
        type: 'model',
        id,
        display_name: id,
        created_at: '2025-01-01T00:00:00Z',
      }));
      return sendJson(res, 200, {
        data,
        has_more: false,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
      });
    }
    sendJson(res, 404, errorBody('not_found_error', `No route ${request.method} ${request.path}`));
  }

  /** Answers one Messages API request from the next script. */
  protected async answer(body: any, res: ServerResponse): Promise<void> {
    const script = this.nextScript({ text: 'ok' });
    const id = `msg_fake_${++this.sequence}`;
    if ('status' in script) {
      if (script.hold) await this.hold(res);
      if (!this.closing && !res.destroyed) sendError(res, script);
      return;
    }
    if (body.stream !== true) {
      if (script.hold) await this.hold(res);
      if (!this.closing && !res.destroyed) sendJson(res, 200, messageOf(script, body, id));
      return;
    }
    const events = streamEventsOf(script, body, id);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (let index = 0; index < events.length; index++) {
      if (script.destroyAfter === index) {
        res.destroy();
        return;
      }
      if (script.endAfter === index) break;
      const { event, data } = events[index];
      // Waiting for each write to flush keeps a later `destroyAfter` from discarding it.
      await new Promise<void>((done) =>
        res.write(`event: ${event}\ndata: ${data}\n\n`, () => done()),
      );
      if (script.hold && index === Math.max(1, script.holdAfter ?? 1) - 1) await this.hold(res);
      if (this.closing || res.destroyed) return;
    }
    res.end();
  }
}

/** An Anthropic-style error body. */
function errorBody(type: string, message: string) {
  return { type: 'error', error: { type, message } };
}

/** The error type the API uses for an HTTP status. */
function errorTypeOf(status: number): string {
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    529: 'overloaded_error',
  };
  return types[status] ?? 'api_error';
}

/** Reads a request and parses its body. */
function sendError(res: ServerResponse, script: FakeAnthropicErrorScript): void {
  const body = script.body ?? errorBody(errorTypeOf(script.status), `Fake error ${script.status}`);
  res.writeHead(script.status, { 'content-type': 'application/json', ...script.headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** The event name of a raw line: its `type`, else `fallback`. */
function eventNameOf(line: string, fallback: string): string {
  try {
    const type = (JSON.parse(line) as { type?: unknown })?.type;
    return typeof type === 'string' ? type : fallback;
  } catch {
    return fallback;
  }
}

/** The SSE events of a streamed answer. */
function streamEventsOf(
  script: Exclude<FakeAnthropicScript, FakeAnthropicErrorScript>,
  body: any,
  id: string,
): SseEvent[] {
  if ('raw' in script) {
    const fallback = script.rawEvent ?? 'message_delta';
    return script.raw.map((data) => ({ event: eventNameOf(data, fallback), data }));
  }
  const events: unknown[] = [];
  const usage = usageOf(script);
  events.push({
    type: 'message_start',
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model: body.model ?? 'claude-fake-4',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      ...(usage
        ? {
            usage: {
              input_tokens: usage.input_tokens,
              cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
              cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
              output_tokens: 1,
            },
          }
        : {}),
    },
  });
  let index = 0;
  if (script.thinking) {
    events.push(
      { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '' } },
      {
        type: 'content_block_delta',
        index,
        delta: { type: 'thinking_delta', thinking: script.thinking },
      },
      { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: 'sig' } },
      { type: 'content_block_stop', index },
    );
    index++;
  }
  const chunks = 'chunks' in script ? script.chunks : undefined;
  if (script.text) {
    events.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
    events.push({ type: 'ping' });
    for (const piece of split(script.text, chunks ?? 1)) {
      events.push({
        type: 'content_block_delta',
        index,
        delta: { type: 'text_delta', text: piece },
      });
    }
    events.push({ type: 'content_block_stop', index });
    index++;
  }
  if ('toolCalls' in script) {
    for (const call of toolCallsOf(script)) {
      events.push({
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: call.id, name: call.name, input: {} },
      });
      events.push({
        type: 'content_block_delta',
        index,
        delta: { type: 'input_json_delta', partial_json: '' },
      });
      for (const piece of split(call.json, script.jsonChunks ?? 3)) {
        events.push({
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: piece },
        });
      }
      events.push({ type: 'content_block_stop', index });
      index++;
    }
  }
  events.push({
    type: 'message_delta',
    delta: { stop_reason: stopReasonOf(script), stop_sequence: null },
    ...(usage ? { usage: { output_tokens: usage.output_tokens } } : {}),
  });
  events.push({ type: 'message_stop' });
  return events.map((event) => ({
    event: (event as { type: string }).type,
    data: JSON.stringify(event),
  }));
}

function stopReasonOf(script: FakeAnthropicTextScript | FakeAnthropicToolUseScript): string {
  if ('toolCalls' in script) return 'tool_use';
  return script.stopReason ?? 'end_turn';
}

/** The tool calls of a script (ids defaulted, input as JSON text). */
function toolCallsOf(script: FakeAnthropicToolUseScript) {
  return script.toolCalls.map((call, index) => ({
    id: call.id ?? `toolu_fake_${index + 1}`,
    name: call.name,
    json: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
  }));
}

/** The usage of a script, or `undefined` when it reports none. */
function usageOf(
  script: FakeAnthropicTextScript | FakeAnthropicToolUseScript,
): FakeAnthropicUsage | undefined {
  const usage = script.usage === undefined ? DEFAULT_USAGE : script.usage;
  return usage ?? undefined;
}

/** One non-streaming message for a script. */
function messageOf(
  script: Exclude<FakeAnthropicScript, FakeAnthropicErrorScript>,
  body: any,
  id: string,
) {
  if ('raw' in script) return assembleRaw(script.raw, id);
  const content: unknown[] = [];
  if (script.thinking) {
    content.push({ type: 'thinking', thinking: script.thinking, signature: 'sig' });
  }
  if (script.text) content.push({ type: 'text', text: script.text });
  if ('toolCalls' in script) {
    for (const call of toolCallsOf(script)) {
      content.push({
        type: 'tool_use',
        id: call.id,
        name: call.name,
        input: JSON.parse(call.json),
      });
    }
  }
  const usage = usageOf(script);
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: body.model ?? 'claude-fake-4',
    content,
    stop_reason: stopReasonOf(script),
    stop_sequence: null,
    ...(usage ? { usage } : {}),
  };
}

/** A message assembled from raw stream lines (text, thinking and tool-use blocks, usage). */
function assembleRaw(lines: string[], id: string) {
  const blocks = new Map<number, any>();
  let usage: Record<string, number> = {};
  let model = 'claude-fake-4';
  let stopReason: string | null = null;
  for (const line of lines) {
    const event = JSON.parse(line);
    if (event.type === 'message_start') {
      model = event.message?.model ?? model;
      usage = { ...usage, ...event.message?.usage };
    } else if (event.type === 'content_block_start') {
      blocks.set(event.index, { ...event.content_block, json: '' });
    } else if (event.type === 'content_block_delta') {
      const block = blocks.get(event.index);
      const delta = event.delta ?? {};
      if (!block) continue;
      if (delta.type === 'text_delta') block.text += delta.text;
      if (delta.type === 'thinking_delta') block.thinking += delta.thinking;
      if (delta.type === 'signature_delta') block.signature = delta.signature;
      if (delta.type === 'input_json_delta') block.json += delta.partial_json;
    } else if (event.type === 'message_delta') {
      stopReason = event.delta?.stop_reason ?? stopReason;
      usage = { ...usage, ...event.usage };
    }
  }
  const content = [...blocks.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, { json, ...block }]) =>
      block.type === 'tool_use' ? { ...block, input: json ? JSON.parse(json) : {} } : block,
    );
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage,
  };
}
