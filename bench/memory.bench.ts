/**
 * Memory per model call: the heap a model call leaves behind once the garbage is collected,
 * through `OpenAiCompatibleProvider.stream` under one long-lived caller signal (a session's, as
 * the agent passes it), against a baseline of bare `fetch` calls reading the same stream from
 * the same local HTTP server in the same run.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { OpenAiCompatibleProvider } from '../src';
import { median } from './support/stats';

const RUNS = 3;
const CALLS = 5_000;
/** Calls made before measuring, so the JIT and lazily built internals have settled. */
const WARM_UP = 2_000;

/** A tiny answer: a role and content delta, a finish, usage, `[DONE]`. */
const STREAM = [
  { id: 'c', choices: [{ index: 0, delta: { role: 'assistant', content: 'ok' } }] },
  { id: 'c', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  { id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
]
  .map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`)
  .concat('data: [DONE]\n\n')
  .join('');

const REQUEST = JSON.stringify({
  model: 'bench',
  messages: [{ role: 'user', content: 'hi' }],
  stream: true,
});

/** A server answering every request with {@link STREAM}; it keeps nothing per request. */
async function streamServer(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(STREAM);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** The heap in use once the garbage is collected. */
async function settledHeap(gc: () => void): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed;
}

/** Bytes retained per 1,000 calls of `call`, made `CALLS` times. */
async function retainedPerThousand(gc: () => void, call: () => Promise<void>): Promise<number> {
  const before = await settledHeap(gc);
  for (let i = 0; i < CALLS; i++) await call();
  return (((await settledHeap(gc)) - before) * 1000) / CALLS;
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** Runs the benchmark; returns its markdown section. */
export async function benchMemory(): Promise<string> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const server = await streamServer();
  const { port } = server.address() as AddressInfo;
  const baseURL = `http://127.0.0.1:${port}/v1`;
  const provider = new OpenAiCompatibleProvider({ baseURL, maxRetries: 0 });
  const session = new AbortController();

  const bare = async (): Promise<void> => {
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: REQUEST,
    });
    await response.text();
  };
  const viaProvider = async (): Promise<void> => {
    const stream = provider.stream({
      model: 'bench',
      messages: [{ role: 'user', content: 'hi' }],
      signal: session.signal,
    });
    for await (const chunk of stream) void chunk;
  };

  const baseline: number[] = [];
  const measured: number[] = [];
  try {
    for (let i = 0; i < WARM_UP; i++) {
      await bare();
      await viaProvider();
    }
    for (let run = 0; run < RUNS; run++) {
      baseline.push(await retainedPerThousand(gc, bare));
      measured.push(await retainedPerThousand(gc, viaProvider));
    }
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  const b = median(baseline);
  const p = median(measured);
  const runs = (values: number[]) => values.map(kb).join(' / ');
  return [
    `### Memory: bytes retained per 1,000 model calls (${CALLS} calls per run, median of ${RUNS}, after ${WARM_UP} warm-up calls)`,
    '',
    'Heap in use after a forced GC, before and after the calls. Baseline: bare `fetch` calls reading',
    'the same tiny SSE answer from the same local HTTP server. The provider streams it under one',
    'long-lived caller signal, as the agent does with a session. The heap swings by a few hundred',
    'KiB per 1,000 calls from run to run either way (the runs column shows it); memory kept per',
    'call shows as a steady figure above that, the same in every run.',
    '',
    '| calls | retained per 1,000 calls | runs |',
    '|---|---:|---:|',
    `| bare fetch (baseline) | ${kb(b)} | ${runs(baseline)} |`,
    `| OpenAiCompatibleProvider.stream | ${kb(p)} | ${runs(measured)} |`,
    `| difference | ${kb(p - b)} | |`,
  ].join('\n');
}
