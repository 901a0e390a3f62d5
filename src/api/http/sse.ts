import type { HttpResponse } from './http-types';

/**
 * A Server-Sent Events response: `data:` lines of JSON, an `id:` line on the last event of a
 * group (a client that reconnects with that `Last-Event-ID` continues after the group).
 */
export class SseWriter {
  /** What was sent before `start`: written right after the headers. */
  private pending = '';
  private started = false;

  constructor(
    private readonly res: HttpResponse,
    /** Frames one event (`data: <json>` and a blank line when absent). */
    private readonly format: (event: object) => string = (event) =>
      `data: ${JSON.stringify(event)}\n\n`,
  ) {}

  /** Whether the response is still writable (the client has not closed it). */
  get open(): boolean {
    return !this.res.writableEnded && !this.res.destroyed;
  }

  /** Sends the status and headers (plus `extra`) at once. */
  start(extra: Record<string, string> = {}): void {
    this.res.status(200);
    this.res.setHeader('content-type', 'text/event-stream; charset=utf-8');
    this.res.setHeader('cache-control', 'no-cache, no-transform');
    this.res.setHeader('x-accel-buffering', 'no');
    for (const [name, value] of Object.entries(extra)) this.res.setHeader(name, value);
    this.res.flushHeaders();
    this.started = true;
    if (this.pending) this.res.write(this.pending);
    this.pending = '';
  }

  /** Sends `events` as one write, the last carrying `id` when given. */
  send(events: readonly object[], id?: string): void {
    if (!this.open || events.length === 0) return;
    let text = '';
    events.forEach((event, i) => {
      if (id !== undefined && i === events.length - 1) text += `id: ${id}\n`;
      text += this.format(event);
    });
    if (this.started) this.res.write(text);
    else this.pending += text;
  }

  /** Sends a raw `data:` line (e.g. `[DONE]`) and ends the response. */
  end(last?: string): void {
    if (!this.open) return;
    if (!this.started) this.start();
    this.res.end(last === undefined ? undefined : `data: ${last}\n\n`);
  }
}

/** The OpenAPI description of the `Last-Event-ID` header every SSE route of the API honours. */
export const LAST_EVENT_ID_HEADER = {
  name: 'Last-Event-ID',
  required: false,
  description: 'An SSE id of this stream (`<turnId>:<seq>`): continue after that event',
};
