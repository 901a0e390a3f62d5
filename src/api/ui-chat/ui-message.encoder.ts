import type { TurnEndEvent } from '../../contracts';
import type { FeedItem } from '../replay/turn-feed';
import type { TurnStreamProtocol } from '../replay/turn-stream';

/** One chunk of the AI SDK's UI message stream (protocol v1), as sent in an SSE `data:` line. */
export type UiChunk = { type: string } & Record<string, unknown>;

/**
 * Turns the events of a turn's stream into UI message chunks (README, "AI SDK UI message
 * stream"). Stateful: it opens a text or reasoning part before its first delta and closes it
 * when something else comes, and keeps `start-step` / `finish-step` around each model call
 * (a new step begins when text or reasoning follows tool results). An encoder that starts in
 * the middle of a turn opens what it needs, so a client that joins late gets a valid stream.
 */
export class UiMessageEncoder {
  private step = false;
  private text?: string;
  private reasoning?: string;
  private afterTools = false;
  private parts = 0;
  private readonly toolsSeen = new Set<string>();

  constructor(private readonly turnId: string) {}

  /** The chunks of one item (none for an item of another turn). */
  encode(item: FeedItem): UiChunk[] {
    const out: UiChunk[] = [];
    if (item.name === 'token:usage') {
      if (item.event.turnId === this.turnId) out.push({ type: 'data-usage', data: item.event });
      return out;
    }
    if (item.name === 'agent:queue' || item.event.turnId !== this.turnId) return out;
    switch (item.name) {
      case 'agent:turn:start':
        out.push({ type: 'data-turn', data: { turnId: this.turnId, phase: 'start' } });
        this.openStep(out);
        break;
      case 'outbound:stream':
        if (item.event.reasoningDelta) this.reasoningDelta(out, item.event.reasoningDelta);
        if (item.event.delta) this.textDelta(out, item.event.delta);
        if (item.event.done) this.closeParts(out);
        break;
      case 'tool:execute':
        this.closeParts(out);
        this.openStep(out);
        if (item.event.phase === 'start' || !this.toolsSeen.has(item.event.callId)) {
          this.toolsSeen.add(item.event.callId);
          out.push({
            type: 'tool-input-available',
            toolCallId: item.event.callId,
            toolName: item.event.name,
            input: item.event.args ?? {},
          });
        }
        if (item.event.phase === 'end') this.toolEnd(out, item.event);
        break;
      case 'agent:turn:end':
        this.turnEnd(out, item.event);
        break;
    }
    return out;
  }

  private openStep(out: UiChunk[]): void {
    if (this.step && this.afterTools) {
      out.push({ type: 'finish-step' });
      this.step = false;
    }
    this.afterTools = false;
    if (!this.step) out.push({ type: 'start-step' });
    this.step = true;
  }

  private textDelta(out: UiChunk[], delta: string): void {
    if (this.reasoning) this.closeParts(out);
    this.openStep(out);
    if (!this.text) {
      this.text = `${this.turnId}-text-${++this.parts}`;
      out.push({ type: 'text-start', id: this.text });
    }
    out.push({ type: 'text-delta', id: this.text, delta });
  }

  private reasoningDelta(out: UiChunk[], delta: string): void {
    if (this.text) this.closeParts(out);
    this.openStep(out);
    if (!this.reasoning) {
      this.reasoning = `${this.turnId}-reasoning-${++this.parts}`;
      out.push({ type: 'reasoning-start', id: this.reasoning });
    }
    out.push({ type: 'reasoning-delta', id: this.reasoning, delta });
  }

  private toolEnd(out: UiChunk[], event: { callId: string; ok?: boolean; result?: string }) {
    out.push(
      event.ok === false
        ? { type: 'tool-output-error', toolCallId: event.callId, errorText: event.result ?? '' }
        : { type: 'tool-output-available', toolCallId: event.callId, output: event.result },
    );
    this.afterTools = true;
  }

  private closeParts(out: UiChunk[]): void {
    if (this.text) out.push({ type: 'text-end', id: this.text });
    if (this.reasoning) out.push({ type: 'reasoning-end', id: this.reasoning });
    this.text = this.reasoning = undefined;
  }

  private turnEnd(out: UiChunk[], event: TurnEndEvent): void {
    this.closeParts(out);
    if (this.step) out.push({ type: 'finish-step' });
    this.step = false;
    const { turnId, outcome, error } = event;
    out.push({ type: 'data-turn', data: { turnId, phase: 'end', outcome } });
    if (outcome === 'error') out.push({ type: 'error', errorText: error ?? 'The turn failed' });
    if (outcome === 'aborted') out.push({ type: 'abort', reason: 'The turn was stopped' });
  }
}

const FINISH_REASONS: Record<TurnEndEvent['outcome'], string> = {
  replied: 'stop',
  silent: 'stop',
  aborted: 'other',
  error: 'error',
};

/**
 * The AI SDK UI message stream around the turn events: `start` (the turn id as message id),
 * `data-queue` while the input waits, `data-settlement` + `error` for an input dropped before
 * any turn, `finish` (`finishReason`), then `[DONE]`.
 */
export const uiMessageProtocol: TurnStreamProtocol = {
  open: () => [],
  begin: (turnId) => [{ type: 'start', messageId: turnId }],
  encoder: (turnId) => new UiMessageEncoder(turnId),
  queued: (position) => [{ type: 'data-queue', data: { position } }],
  dropped: (settlement) => {
    const why = settlement.settled === 'dropped' ? `dropped (${settlement.reason})` : 'discarded';
    return [
      { type: 'data-settlement', data: settlement },
      { type: 'error', errorText: `The input was ${why} before any turn` },
      { type: 'finish', finishReason: 'other' },
    ];
  },
  finish: (end) => [{ type: 'finish', finishReason: FINISH_REASONS[end.outcome] }],
  last: '[DONE]',
};
