/**
 * Queue-burst benchmark: the server runs as its own process (as operators run it); 2,000 sourced
 * inputs are posted in a burst to one session whose turn is held by the model, while `/health`
 * is probed every 5 ms and a Socket.IO client subscribes to the session. Reports `/health`
 * latency p50/p99 during the burst against the same probes on the idle server measured in the
 * same run, and how many `queue` messages the subscriber received.
 *
 * Run: node -r @swc-node/register -e "require('./bench/queue-burst.bench.ts').benchQueueBurst().then(console.log)"
 */
import { io } from 'socket.io-client';
import request from 'supertest';
import { ServerProcess } from '../test/support/api-process';
import { FakeOpenAiServer } from '../test/support/fake-openai-server';

const INPUTS = 2_000;
const PROBE_EVERY_MS = 5;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

const TOKEN = 'bench-admin-token-0123456789abcdef';

/** Probes `/health` one after another until `done` resolves; latencies in ms. */
async function probe(url: string, done: Promise<unknown>): Promise<number[]> {
  const latencies: number[] = [];
  let finished = false;
  void done.then(() => (finished = true));
  while (!finished) {
    const started = performance.now();
    await request(url).get('/health');
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, PROBE_EVERY_MS));
  }
  return latencies;
}

/** Markdown section for BENCHMARKS.md. */
export async function benchQueueBurst(): Promise<string> {
  const model = await FakeOpenAiServer.start();
  const server = ServerProcess.start({
    LLM_BASE_URL: model.url,
    LLM_MODEL: 'test-model',
    AGENT_ADMIN_TOKEN: TOKEN,
    AGENT_MAX_WAITING: String(INPUTS + 10),
  });
  const auth = { Authorization: `Bearer ${TOKEN}` };
  try {
    const url = await server.url();
    const idle = await probe(url, new Promise((resolve) => setTimeout(resolve, 1000)));
    const socket = io(`${url}/agent`, { auth: { token: TOKEN }, transports: ['websocket'] });
    let queueMessages = 0;
    socket.on('queue', () => queueMessages++);
    await new Promise((resolve) => socket.emit('subscribe', { sessionId: 'burst' }, resolve));
    model.enqueue({ text: 'held', hold: true });
    await request(url)
      .post('/agent/messages')
      .set(auth)
      .send({ sessionId: 'burst', content: 'go' });
    const body = (i: number) => ({
      sessionId: 'burst',
      content: `job ${i} ${'x'.repeat(480)}`,
      source: 'job',
    });
    const burst = (async () => {
      for (let at = 0; at < INPUTS; at += 100) {
        await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            request(url)
              .post('/agent/messages')
              .set(auth)
              .send(body(at + i)),
          ),
        );
      }
    })();
    const during = await probe(url, burst);
    await burst;
    socket.close();
    model.release();
    const row = (label: string, values: number[]) =>
      `| ${label} | ${values.length} | ${percentile(values, 50).toFixed(1)} | ${percentile(values, 99).toFixed(1)} |`;
    return [
      `### Queue burst: ${INPUTS} inputs of 500 bytes to one session, /health probed meanwhile`,
      '',
      '| /health | probes | p50 ms | p99 ms |',
      '|---|---:|---:|---:|',
      row('idle server (baseline)', idle),
      row('during the burst', during),
      '',
      `p99 during / idle: ${(percentile(during, 99) / percentile(idle, 99)).toFixed(2)}x. The subscriber received ${queueMessages} \`queue\` messages for ${INPUTS} queue changes.`,
    ].join('\n');
  } finally {
    server.signal('SIGKILL');
    await server.exited;
    await model.close();
  }
}
