import type OpenAI from 'openai';
import { APIError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { Stream } from 'openai/core/streaming';
import { isEmpty, isEventStream, isJson, mediaType } from '../answer-body';
import { StreamTruncatedError, type ErrorContext } from '../provider-error';
import { malformed, notAStream } from '../provider-error.sentences';

/**
 * The wire chunks of a successful (2xx) answer to a streaming request, whatever it really is:
 *
 * - an event stream (or no content type at all): its chunks; a body that ends without
 *   `data: [DONE]` fails with {@link StreamTruncatedError}, so a connection closed mid-answer is
 *   told apart from a finished answer (the SDK ends both silently), while an empty body is an
 *   empty answer;
 * - a JSON chat completion (a proxy that ignores `stream: true`): the whole answer as one chunk;
 * - anything else (an HTML login page, a proxy's text notice): a one-sentence error naming the
 *   content type, unless the body is empty (then an empty answer).
 *
 * `controller` is the attempt's: the SDK's stream aborts it when the consumer stops early.
 */
export async function* answerChunks(
  response: Response,
  controller: AbortController,
  client: OpenAI,
  ctx: ErrorContext,
): AsyncGenerator<ChatCompletionChunk, void, undefined> {
  if (!response.body) return;
  const type = mediaType(response.headers.get('content-type'));
  if (isEventStream(type)) {
    yield* Stream.fromSSEResponse<ChatCompletionChunk>(
      watchDone(response, response.body),
      controller,
      client,
    );
    return;
  }
  if (isJson(type)) {
    const chunk = await jsonAnswer(response, ctx);
    if (chunk) yield chunk;
    return;
  }
  if (!(await isEmpty(response))) throw notAStream(ctx, type);
}

/** `response` with a body that fails when it ends, not empty, without `data: [DONE]`. */
function watchDone(response: Response, body: ReadableStream<Uint8Array>): Response {
  const decoder = new TextDecoder();
  let tail = '';
  let done = false;
  let empty = true;
  const watch = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, out) {
      if (chunk.byteLength) empty = false;
      if (!done) {
        const text = tail + decoder.decode(chunk, { stream: true });
        done = /(?:^|[\r\n])data:[ \t]*\[DONE\]/.test(text);
        tail = text.slice(-32);
      }
      out.enqueue(chunk);
    },
    flush(out) {
      if (!done && !empty) out.error(new StreamTruncatedError());
    },
  });
  return new Response(body.pipeThrough(watch), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/**
 * A JSON answer to a streaming request as one stream chunk: a chat completion's message as its
 * delta (content, reasoning, tool calls), its finish reason and usage. `undefined` for an empty
 * body; an `error` object is thrown as the stream's error chunk would be.
 */
async function jsonAnswer(
  response: Response,
  ctx: ErrorContext,
): Promise<ChatCompletionChunk | undefined> {
  const text = await response.text();
  if (!text.trim()) return undefined;
  let body: any;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw malformed(ctx, 'a JSON answer that does not parse', error);
  }
  if (body?.error) throw new APIError(undefined, body.error, undefined, response.headers);
  if (!Array.isArray(body?.choices)) {
    throw malformed(ctx, 'a JSON answer that is not a chat completion');
  }
  const choice = body.choices[0] ?? {};
  const message = choice.message ?? {};
  const toolCalls = Array.isArray(message.tool_calls) ? message.tool_calls : undefined;
  const delta = {
    content: message.content,
    reasoning_content: message.reasoning_content,
    reasoning: message.reasoning,
    tool_calls: toolCalls?.map((call: object, index: number) => ({ index, ...call })),
  };
  return {
    id: String(body.id ?? ''),
    object: 'chat.completion.chunk',
    created: Number(body.created ?? 0),
    model: String(body.model ?? ''),
    // A whole answer is finished by definition, even when the proxy left the reason out.
    choices: [{ index: 0, delta, finish_reason: choice.finish_reason ?? 'stop' }],
    usage: body.usage ?? undefined,
  };
}
