/**
 * One process of the cross-process warm-latency measurement (`warm-procs.ts`): the agent of
 * `bench/support/pg-agent.ts` with the gated model of `distributed-latency.ts`, in one process
 * (`local`) or as an instance of distributed mode (`dist`). Run with `-r @swc-node/register`;
 * argument 2 is the mode, argument 3 a JSON `WarmChildSetting`.
 *
 * Prints `{"ready":true}`, then answers each command line on stdin with JSON lines, each with its
 * command's `tag`:
 * - `{"cmd":"anchor","tag","sessionId"}`: arms the gate and sends the anchor input, which must be
 *   taken here (an idle session runs where its input came); answers `{"started":true}` at its
 *   turn start and `{"settled":true}` once it settled.
 * - `{"cmd":"watch","tag","sessionId","content"}`: answers `{"armed":true}`, then, once the input
 *   with `content` is in this instance's waiting list, opens the gate, and answers
 *   `{"heldMs":…}`: from that moment to the end of the input's own turn, on this clock.
 * - `{"cmd":"send","tag","sessionId","content"}`: sends the input and answers `{"sentMs":…}`:
 *   from `handleMessage` to its settlement, on this clock.
 * - `{"cmd":"close"}`: closes and exits.
 *
 * The sender's time less the holder's is the way in plus the way back of the input, whatever the
 * two clocks (each is read in its own process only).
 */
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import type { QueueEvent, TurnEndEvent, TurnStartEvent } from '../src';
import { ANCHOR, Gate, GatedProvider } from './distributed-latency';
import { pgAgent, replied } from './support/pg-agent';

/** What the parent gives a child. */
export interface WarmChildSetting {
  db: string;
  redis: string;
  prefix: string;
  instanceId: string;
}

/** A command of the parent. */
export type WarmCommand =
  | { cmd: 'anchor' | 'watch' | 'send'; tag: string; sessionId: string; content?: string }
  | { cmd: 'close' };

const answer = (tag: string, body: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ tag, ...body })}\n`);

async function main(): Promise<void> {
  const [mode, json] = process.argv.slice(2);
  const setting = JSON.parse(json) as WarmChildSetting;
  const gate = new Gate();
  const distribution =
    mode === 'dist'
      ? { redis: setting.redis, prefix: setting.prefix, instanceId: setting.instanceId }
      : undefined;
  const app = await pgAgent(
    setting.db,
    distribution && { ...distribution, concurrency: 16 },
    new GatedProvider(gate),
  );
  const once = <T>(name: string, match: (event: T) => boolean, then: (event: T) => void) => {
    const listener = (event: T) => {
      if (!match(event)) return;
      app.events.off(name, listener);
      then(event);
    };
    app.events.on(name, listener);
  };
  const commands: Record<string, (c: Extract<WarmCommand, { tag: string }>) => void> = {
    anchor: ({ tag, sessionId }) => {
      gate.arm();
      once<TurnStartEvent>(
        'agent:turn:start',
        (e) => e.sessionId === sessionId,
        () => answer(tag, { started: true }),
      );
      const input = { sessionId, content: ANCHOR, source: 'job' as const };
      void app.agent.handleMessage(input).then((settlement) => {
        replied(settlement);
        answer(tag, { settled: true });
      });
    },
    watch: ({ tag, sessionId, content }) => {
      let queuedAt = 0;
      let turnId: string | undefined;
      const mine = (list: readonly { content?: unknown }[]) =>
        list.some((m) => m.content === content);
      once<QueueEvent>(
        'agent:queue',
        (e) => e.sessionId === sessionId && mine(e.waiting),
        () => {
          queuedAt = performance.now();
          gate.release();
        },
      );
      once<TurnStartEvent>(
        'agent:turn:start',
        (e) => e.sessionId === sessionId && mine(e.inputs),
        (e) => (turnId = e.turnId),
      );
      once<TurnEndEvent>(
        'agent:turn:end',
        (e) => turnId !== undefined && e.turnId === turnId,
        () => answer(tag, { heldMs: performance.now() - queuedAt }),
      );
      answer(tag, { armed: true });
    },
    send: ({ tag, sessionId, content }) => {
      const at = performance.now();
      void app.agent.handleMessage({ sessionId, content: content!, source: 'job' }).then((s) => {
        const sentMs = performance.now() - at;
        replied(s);
        answer(tag, { sentMs });
      });
    },
  };
  answer('', { ready: true });
  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line) as WarmCommand;
    if (command.cmd === 'close') break;
    commands[command.cmd](command);
  }
  gate.release();
  await app.close();
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
