/**
 * Queue-burst benchmark: 2,000 sourced inputs of 500 bytes are posted to one session, 100 at a
 * time over keep-alive connections (`fetch`, as a job producer sends them), while `/health` is
 * probed every 5 ms. The agent server runs as its own process (SQLite store, as operators run
 * it); the model holds the session's turn, so every input waits, and a Socket.IO client
 * subscribes to the session. Baseline, in the same run: a bare `node:http` server in its own
 * process that reads and parses each body and answers `202` (the least any server does), under
 * the same burst and probes. Runs alternate; medians of `REPEATS`.
 *
 * Probes come from worker threads with their own event loops, so the figures are the servers',
 * not the bench's loop while it sends the burst: one prober opens a fresh connection per probe
 * (as a kubelet does), one reuses a keep-alive connection (as a load balancer may). The rate
 * limits are raised so that the whole burst is accepted (`202`), which is checked.
 *
 * Run: node -r @swc-node/register -e "require('./bench/queue-burst.bench.ts').benchQueueBurst().then(console.log)"
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { io } from 'socket.io-client';
import { ServerProcess } from '../test/support/api-process';
import { FakeOpenAiServer } from '../src/testing';
import { median, percentile } from './support/stats';

const INPUTS = 2_000;
const AT_ONCE = 100;
const PROBE_EVERY_MS = 5;
const REPEATS = 3;
const TOKEN = 'bench-admin-token-0123456789abcdef';

type ProbeMode = 'fresh' | 'keep-alive';
const MODES: ProbeMode[] = ['fresh', 'keep-alive'];

/** The prober (plain JavaScript, run in a worker): GET /health until told to stop. */
const PROBER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const agent = workerData.mode === 'keep-alive'
  ? new http.Agent({ keepAlive: true, maxSockets: 1 })
  : false;
let stopped = false;
parentPort.on('message', () => (stopped = true));
const once = () => new Promise((resolve, reject) => {
  const started = performance.now();
  http.get(workerData.url + '/health', { agent }, (res) => {
    res.resume();
    res.on('end', () => resolve({ ms: performance.now() - started, status: res.statusCode }));
  }).on('error', reject);
});
(async () => {
  const latencies = [];
  const statuses = {};
  while (!stopped) {
    const { ms, status } = await once();
    latencies.push(ms);
    statuses[status] = (statuses[status] || 0) + 1;
    await new Promise((resolve) => setTimeout(resolve, workerData.every));
  }
  parentPort.postMessage({ latencies, statuses });
})();
`;

/** The baseline server (plain JavaScript, its own process): parse the body, answer 202. */
const BARE_SERVER = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    if (req.method === 'POST') JSON.parse(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(req.method === 'POST' ? 202 : 200, { 'content-type': 'application/json' });
    res.end(req.method === 'POST' ? '{"accepted":true}' : '{"status":"ok"}');
  });
});
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port));
`;

/** Probes `/health` from a worker thread until `done` resolves; latencies in ms, all 200. */
async function probe(url: string, mode: ProbeMode, done: Promise<unknown>): Promise<number[]> {
  const worker = new Worker(PROBER, {
    eval: true,
    workerData: { url, mode, every: PROBE_EVERY_MS },
  });
  const result = new Promise<{ latencies: number[]; statuses: Record<string, number> }>(
    (resolve, reject) => worker.once('message', resolve).once('error', reject),
  );
  await done.catch(() => undefined);
  worker.postMessage('stop');
  const { latencies, statuses } = await result;
  await worker.terminate();
  if (Object.keys(statuses).some((status) => status !== '200')) {
    throw new Error(`/health answered ${JSON.stringify(statuses)}, not only 200`);
  }
  return latencies;
}

/** Posts `INPUTS` inputs, `AT_ONCE` at a time; throws unless every one was answered 202. */
async function burst(url: string, headers: Record<string, string>): Promise<void> {
  const statuses: Record<number, number> = {};
  for (let at = 0; at < INPUTS; at += AT_ONCE) {
    const answers = await Promise.all(
      Array.from({ length: AT_ONCE }, async (_, i) => {
        const response = await fetch(`${url}/agent/messages`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({
            sessionId: 'burst',
            content: `job ${at + i} ${'x'.repeat(480)}`,
            source: 'job',
          }),
        });
        await response.text();
        return response.status;
      }),
    );
    for (const status of answers) statuses[status] = (statuses[status] ?? 0) + 1;
  }
  if (statuses[202] !== INPUTS) {
    throw new Error(`the burst was answered ${JSON.stringify(statuses)}, not ${INPUTS} x 202`);
  }
}

/** p99 of each probe mode: idle for a second, then during one burst. */
interface Run {
  idle: Record<ProbeMode, number>;
  during: Record<ProbeMode, number>;
  probes: number;
  /** Inputs answered per second during the burst. */
  inputsPerSecond: number;
}

/** Idle probes, then the burst with probes of both modes at once. */
async function measure(url: string, headers: Record<string, string>): Promise<Run> {
  await probe(url, 'fresh', new Promise((resolve) => setTimeout(resolve, 300))); // warm-up
  const idleDone = new Promise((resolve) => setTimeout(resolve, 1000));
  const idle = await Promise.all(MODES.map((mode) => probe(url, mode, idleDone)));
  const started = performance.now();
  const sending = burst(url, headers).then(() => performance.now() - started);
  const during = await Promise.all(MODES.map((mode) => probe(url, mode, sending)));
  const burstMs = await sending;
  return {
    idle: { fresh: percentile(idle[0], 99), 'keep-alive': percentile(idle[1], 99) },
    during: { fresh: percentile(during[0], 99), 'keep-alive': percentile(during[1], 99) },
    probes: during[0].length + during[1].length,
    inputsPerSecond: (INPUTS * 1000) / burstMs,
  };
}

/** One run against the bare baseline server. */
async function bareRun(): Promise<Run> {
  const child: ChildProcess = spawn(process.execPath, ['-e', BARE_SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const url = await new Promise<string>((resolve) =>
      child.stdout!.once('data', (data: Buffer) => resolve(String(data).trim())),
    );
    return await measure(url, {});
  } finally {
    child.kill('SIGKILL');
  }
}

/** One run against the agent server; also counts the subscriber's `queue` messages. */
async function agentRun(): Promise<Run & { queueMessages: number }> {
  const model = await FakeOpenAiServer.start();
  const server = ServerProcess.start({
    LLM_BASE_URL: model.url,
    LLM_MODEL: 'test-model',
    AGENT_ADMIN_TOKEN: TOKEN,
    AGENT_MAX_WAITING: String(INPUTS + 10),
    HTTP_ADMIN_RATE_LIMIT: String(INPUTS * 10),
  });
  const auth = { Authorization: `Bearer ${TOKEN}` };
  try {
    const url = await server.url();
    const socket = io(`${url}/agent`, { auth: { token: TOKEN }, transports: ['websocket'] });
    let queueMessages = 0;
    socket.on('queue', () => queueMessages++);
    await new Promise((resolve) => socket.emit('subscribe', { sessionId: 'burst' }, resolve));
    model.enqueue({ text: 'held', hold: true });
    const opened = await fetch(`${url}/agent/messages`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId: 'burst', content: 'go' }),
    });
    if (opened.status !== 202) throw new Error(`the opening input got ${opened.status}`);
    const run = await measure(url, auth);
    socket.close();
    model.release();
    return { ...run, queueMessages };
  } finally {
    server.signal('SIGKILL');
    await server.exited;
    await model.close();
  }
}

/** Markdown section for BENCHMARKS.md. */
export async function benchQueueBurst(): Promise<string> {
  const bare: Run[] = [];
  const agent: (Run & { queueMessages: number })[] = [];
  for (let i = 0; i < REPEATS; i++) {
    bare.push(await bareRun());
    agent.push(await agentRun());
  }
  const cell = (runs: Run[], phase: 'idle' | 'during', mode: ProbeMode) =>
    median(runs.map((run) => run[phase][mode]));
  const row = (label: string, runs: Run[], phase: 'idle' | 'during') =>
    `| ${label} | ${MODES.map((mode) => cell(runs, phase, mode).toFixed(1)).join(' | ')} |`;
  const ratio = (mode: ProbeMode) =>
    (cell(agent, 'during', mode) / cell(bare, 'during', mode)).toFixed(2);
  return [
    `### Queue burst: ${INPUTS} inputs of 500 bytes to one session, /health probed meanwhile`,
    '',
    `/health p99 in ms, median of ${REPEATS} runs (${median(agent.map((r) => r.probes))} probes per burst):`,
    '',
    '| server | fresh connection | keep-alive |',
    '|---|---:|---:|',
    row('bare node:http, idle', bare, 'idle'),
    row('bare node:http, during the burst (baseline)', bare, 'during'),
    row('agent server, idle', agent, 'idle'),
    row('agent server, during the burst', agent, 'during'),

    '',
    `During the burst, agent / bare: ${ratio('fresh')}x (fresh connection), ${ratio('keep-alive')}x (keep-alive). ` +
      `Inputs answered per second during the burst: bare ${median(bare.map((r) => r.inputsPerSecond)).toFixed(0)}, agent ${median(agent.map((r) => r.inputsPerSecond)).toFixed(0)}. ` +
      `The subscriber received a median of ${median(agent.map((r) => r.queueMessages))} \`queue\` messages for ${INPUTS} queue changes.`,
  ].join('\n');
}
