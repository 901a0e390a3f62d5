import { isEmpty, isEventStream, isJson, mediaType } from '../answer-body';
import type { ErrorContext } from '../provider-error';
import { malformed, notAStream } from '../provider-error.sentences';
import type { AnthropicSdk } from './anthropic.sdk';

/**
 * The Messages API events of a successful (2xx) answer to a streaming request, whatever it
 * really is: an event stream (or no content type at all): its events; a JSON message (a proxy
 * that ignores `stream: true`): the events that stream it; anything else (an HTML login page):
 * a one-sentence error naming the content type. An empty body has no events (the reader then
 * reports the answer as cut off).
 *
 * `events` is the SDK's stream over `response`: even when the body is read here, it is run to
 * its end, for the SDK unlinks its request from the abort signal only when its stream ends.
 */
export async function* answerEvents(
  events: AsyncIterable<unknown>,
  response: Response,
  sdk: Pick<AnthropicSdk, 'APIError'>,
  ctx: ErrorContext,
): AsyncGenerator<unknown, void, undefined> {
  const type = mediaType(response.headers.get('content-type'));
  if (isEventStream(type)) {
    yield* events;
    return;
  }
  try {
    if (isJson(type)) {
      const text = await response.text();
      if (text.trim()) yield* messageEvents(parse(text, ctx), response, sdk, ctx);
    } else if (!(await isEmpty(response))) {
      throw notAStream(ctx, type);
    }
  } finally {
    await release(events);
  }
}

/** Runs the SDK's stream over a body already read, which ends it (and its request) at once. */
async function release(events: AsyncIterable<unknown>): Promise<void> {
  try {
    for await (const event of events) {
      void event;
      break;
    }
  } catch {
    // The body was read here: the stream can only fail, and that is all it had to do.
  }
}

function parse(text: string, ctx: ErrorContext): any {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw malformed(ctx, 'a JSON answer that does not parse', error);
  }
}

/** A whole message as the stream events that would have carried it. */
function messageEvents(
  message: any,
  response: Response,
  sdk: Pick<AnthropicSdk, 'APIError'>,
  ctx: ErrorContext,
): unknown[] {
  if (message?.type === 'error' || message?.error) {
    throw new sdk.APIError(undefined, message, undefined, response.headers, message?.error?.type);
  }
  if (message?.type !== 'message' || !Array.isArray(message.content)) {
    throw malformed(ctx, 'a JSON answer that is not a message');
  }
  const { content, ...rest } = message as { content: unknown[] };
  return [
    { type: 'message_start', message: { ...rest, content: [] } },
    ...content.map((block, index) => ({
      type: 'content_block_start',
      index,
      content_block: block,
    })),
    { type: 'message_stop' },
  ];
}
