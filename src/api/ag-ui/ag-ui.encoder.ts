import type { FeedItem } from '../replay/turn-feed';
import type { StreamEnd, TurnStreamProtocol } from '../replay/turn-stream';

/** One AG-UI event (`type` one of AG-UI's `EventType` names). */
export type AgUiEvent = { type: string } & Record<string, unknown>;

/**
 * Turns the events of a turn's stream into AG-UI events (README, "AG-UI"): text as
 * `TEXT_MESSAGE_START` / `CONTENT` / `END`, reasoning as `REASONING_START`,
 * `REASONING_MESSAGE_START` / `CONTENT` / `END`, `REASONING_END`, each tool call as
 * `TOOL_CALL_START` / `ARGS` / `END` then `TOOL_CALL_RESULT`. An encoder that starts in the
 * middle of a turn opens what it needs.
 */
export class AgUiEncoder {
  private text?: string;
  private reasoning?: string;
  private parts = 0;
  private readonly toolsSeen = new Set<string>();

  constructor(private readonly turnId: string) {}

  /** The events of one item (none for an item of another turn). */
  encode(item: FeedItem): AgUiEvent[] {
    const out: AgUiEvent[] = [];
    if (item.name === 'token:usage' || item.name === 'agent:queue') return out;
    if (item.event.turnId !== this.turnId) return out;
    switch (item.name) {
      case 'outbound:stream':
        if (item.event.reasoningDelta) this.reasoningDelta(out, item.event.reasoningDelta);
        if (item.event.delta) this.textDelta(out, item.event.delta);
        if (item.event.done) this.close(out);
        break;
      case 'tool:execute': {
        this.close(out);
        const { callId: toolCallId, name, phase, args } = item.event;
        if (phase === 'start' || !this.toolsSeen.has(toolCallId)) {
          this.toolsSeen.add(toolCallId);
          out.push(
            { type: 'TOOL_CALL_START', toolCallId, toolCallName: name },
            { type: 'TOOL_CALL_ARGS', toolCallId, delta: JSON.stringify(args ?? {}) },
            { type: 'TOOL_CALL_END', toolCallId },
          );
        }
        if (phase === 'end') {
          out.push({
            type: 'TOOL_CALL_RESULT',
            messageId: `${toolCallId}-result`,
            toolCallId,
            content: item.event.result ?? '',
            role: 'tool',
          });
        }
        break;
      }
      case 'agent:turn:end':
        this.close(out);
        break;
    }
    return out;
  }

  private textDelta(out: AgUiEvent[], delta: string): void {
    if (this.reasoning) this.close(out);
    if (!this.text) {
      this.text = `${this.turnId}-text-${++this.parts}`;
      out.push({ type: 'TEXT_MESSAGE_START', messageId: this.text, role: 'assistant' });
    }
    out.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: this.text, delta });
  }

  private reasoningDelta(out: AgUiEvent[], delta: string): void {
    if (this.text) this.close(out);
    if (!this.reasoning) {
      this.reasoning = `${this.turnId}-reasoning-${++this.parts}`;
      const messageId = this.reasoning;
      out.push(
        { type: 'REASONING_START', messageId },
        { type: 'REASONING_MESSAGE_START', messageId, role: 'reasoning' },
      );
    }
    out.push({ type: 'REASONING_MESSAGE_CONTENT', messageId: this.reasoning, delta });
  }

  private close(out: AgUiEvent[]): void {
    if (this.text) out.push({ type: 'TEXT_MESSAGE_END', messageId: this.text });
    if (this.reasoning) {
      const messageId = this.reasoning;
      out.push({ type: 'REASONING_MESSAGE_END', messageId }, { type: 'REASONING_END', messageId });
    }
    this.text = this.reasoning = undefined;
  }
}

/**
 * AG-UI around the turn events, for the run `runId` of thread `threadId`: `RUN_STARTED` first,
 * `CUSTOM` events `agent.turn` (`{ turnId }`, when the run follows a turn) and `agent.queue`
 * (`{ position }`, while the input waits), then `RUN_FINISHED` (`result: { turnId, outcome }`)
 * or `RUN_ERROR` (a failed turn, or an input dropped before any turn).
 */
export function agUiProtocol(threadId: string, runId: string): TurnStreamProtocol {
  return {
    open: () => [{ type: 'RUN_STARTED', threadId, runId }],
    begin: (turnId) => [{ type: 'CUSTOM', name: 'agent.turn', value: { turnId } }],
    encoder: (turnId) => new AgUiEncoder(turnId),
    queued: (position) => [{ type: 'CUSTOM', name: 'agent.queue', value: { position } }],
    dropped: (settlement) => {
      const why = settlement.settled === 'dropped' ? `dropped (${settlement.reason})` : 'discarded';
      const code = settlement.settled === 'dropped' ? `dropped:${settlement.reason}` : 'discarded';
      return [{ type: 'RUN_ERROR', message: `The input was ${why} before any turn`, code }];
    },
    finish: ({ turnId, outcome, error }: StreamEnd) =>
      outcome === 'error'
        ? [{ type: 'RUN_ERROR', message: error ?? 'The turn failed', code: 'turn-error' }]
        : [{ type: 'RUN_FINISHED', threadId, runId, result: { turnId, outcome } }],
  };
}
