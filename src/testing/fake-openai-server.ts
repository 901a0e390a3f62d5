import type { Server, ServerResponse } from 'node:http';
import { listenLocal, sendJson, type ReceivedHttpRequest } from './http-plumbing';
import { ScriptedHttpServer } from './scripted-http-server';
import type { FakeFaultScript, FakeScript, FakeTextScript } from './fake-openai.scripts';
import { completionOf, sendError, streamEventsOf } from './fake-openai.wire';

const BASE_PATH = '/v1';

/**
 * A real local HTTP server speaking the OpenAI chat-completions wire format, for tests: point
 * an `OpenAiCompatibleProvider` (or the `openai` client) at {@link FakeOpenAiServer.url} and
 * script what the "model" answers, call by call.
 *
 * Each `POST /v1/chat/completions` takes the oldest queued script (a text reply `"ok"` when none
 * is queued) and answers it as SSE when the body has `stream: true` (a usage chunk only when
 * `stream_options.include_usage` is set), else as one JSON completion. `GET /v1/models` lists
 * `models`; any other route answers 404. The OpenAI SDK retries 408/409/429/5xx answers: give
 * clients `maxRetries: 0` when testing errors, or queue one script per attempt (and
 * `discardScripts()` those left over). {@link FakeFaultScript}s break the wire in the ways real
 * endpoints do. `requests` and `nextRequest()` show what the client sent; `close()` it after
 * the test.
 *
 * @example
 * ```ts
 * const server = await FakeOpenAiServer.start();
 * server.enqueue(
 *   { toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] },
 *   { text: 'Order 42 has shipped.', chunks: 3 },
 * );
 * const provider = new OpenAiCompatibleProvider({ baseURL: server.url, maxRetries: 0 });
 * // ... run the agent; then:
 * expect(server.requests[1].messages.at(-1)).toMatchObject({ role: 'tool' });
 * await server.close();
 * ```
 */
export class FakeOpenAiServer extends ScriptedHttpServer<FakeScript> {
  /** Model ids listed by `GET /v1/models`. @defaultValue `['fake-model']` */
  models: string[] = ['fake-model'];

  private constructor(server: Server) {
    super(server, (message) => ({ error: { message, type: 'fake_server_error' } }));
  }

  /** Starts a server on a free port of 127.0.0.1; `close()` it when done. */
  static async start(): Promise<FakeOpenAiServer> {
    return new FakeOpenAiServer(await listenLocal());
  }

  /** Base URL for an OpenAI client (`baseURL`), `http://127.0.0.1:<port>/v1`. */
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
