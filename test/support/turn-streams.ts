import type { UIMessageChunk } from 'ai';
import { nextSocketEvent, type AgentClient } from './api-app';

/** What `recordSocket` records: each event a socket received, in order. */
export type SocketSeen = { event: string; payload: any }[];

/** The socket events of a turn's stream (the ones numbered by `seq`). */
const STREAM_EVENTS = new Set(['turn', 'stream', 'tool']);

/** The numbered events a socket received for `turnId`, in the order received. */
export function streamOf(seen: SocketSeen, turnId: string): SocketSeen {
  return seen.filter((e) => STREAM_EVENTS.has(e.event) && e.payload.turnId === turnId);
}

/** Resolves once the socket has received a numbered event of seq `seq` or later. */
export function reaching(socket: AgentClient, seq: number): Promise<unknown> {
  return Promise.race([
    nextSocketEvent(socket, 'stream', (e) => (e.seq ?? 0) >= seq),
    nextSocketEvent(socket, 'turn', (e) => (e.seq ?? 0) >= seq),
    nextSocketEvent(socket, 'tool', (e) => (e.seq ?? 0) >= seq),
  ]);
}

/** The next turn end the socket receives. */
export const turnEnd = (socket: AgentClient) =>
  nextSocketEvent(socket, 'turn', (e) => e.phase === 'end');

/** Reads a stream of UI message chunks (the AI SDK's) to its end. */
export async function drain(stream: ReadableStream<UIMessageChunk>): Promise<UIMessageChunk[]> {
  const chunks: UIMessageChunk[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return chunks;
    chunks.push(value);
  }
}

/** The text of the chunks' text deltas. */
export const textOf = (chunks: UIMessageChunk[]) =>
  chunks.map((c) => (c.type === 'text-delta' ? c.delta : '')).join('');

/** The turn ids the chunks' `data-turn` parts name, once each, in order. */
export const turnIdsOf = (chunks: UIMessageChunk[]): string[] => [
  ...new Set(
    chunks.filter((c) => c.type === 'data-turn').map((c) => (c as any).data.turnId as string),
  ),
];
