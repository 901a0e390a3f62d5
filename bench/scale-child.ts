/**
 * The child process of `scale.bench.ts`: one measurement in a fresh process, printed as one
 * JSON line on stdout. Run with `--expose-gc -r @swc-node/register`; the argument picks it:
 *
 * - `sessions`: heap and RSS before and after one steady turn in each of `SESSIONS` sessions.
 * - `delay`: event-loop delay while `BACKGROUND` sessions stream, alone, then during turns of
 *   a session with a ~100,000-token uncached history (a host store: fresh objects, no counts).
 */
import 'reflect-metadata';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { get_encoding } from 'tiktoken';
import {
  AgentEvents,
  InputInbox,
  MemoryMessageLog,
  SessionStore,
  type ChatRequest,
  type ChatStreamChunk,
  type NewMessage,
  type Settlement,
  type TokenUsageEvent,
} from '../src';
import { answerChunks, steadyAgent, ZeroLatencyProvider } from './support/zero-latency';

/** Sessions of the memory measurement, one turn each. */
export const SESSIONS = 10_000;
/** Turns of one session run before the memory baseline is taken. */
export const WARM_UP_TURNS = 3_000;
/** Turns run at once in the memory measurement. */
export const AT_ONCE = 64;
/** Sessions streaming turns in a loop during the delay measurement. */
export const BACKGROUND = 32;
/** Delay of the paced model before each chunk, ms. */
export const CHUNK_DELAY_MS = 2;
/** Tokens (o200k_base, texts only) of the big session's history, at least. */
export const BIG_HISTORY_TOKENS = 100_000;
/** Characters of one history message of the big session (the worker threshold is 20,000). */
export const BIG_MESSAGE_CHARS = 3_300;
/** Big turns measured, each in a new session. */
export const BIG_TURNS = 3;
/** Milliseconds of the baseline (background sessions only). */
export const BASELINE_MS = 2_000;
/** Milliseconds the background sessions stream before anything is measured. */
const WARM_UP_MS = 1_000;

/** Throws unless the turn ended with a reply. */
function replied(settlement: Settlement): void {
  if (settlement.settled !== 'turn' || settlement.outcome !== 'replied') {
    throw new Error(`a turn settled ${JSON.stringify(settlement)}`);
  }
}

const gc = (global as { gc?: (options?: object) => void }).gc;

/** Milliseconds between the RSS samples of `settled`, and most samples taken. */
const RSS_SAMPLE_MS = 25;
const RSS_SAMPLES = 40;

/**
 * The heap and RSS once the garbage is collected and the RSS has settled; `rssAtGc` is the RSS
 * sampled right after the collection, before V8's background thread handed the freed pages
 * back (up to 16 MB more, varying run to run: the bimodal figures of earlier runs).
 */
async function settled(): Promise<{ heapUsed: number; rss: number; rssAtGc: number }> {
  if (!gc) throw new Error('run with --expose-gc');
  await delay(50);
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  // What V8's memory reducer does once a process is idle: a collection that also hands pooled
  // free pages back to the system. Idle sessions are measured, not the last burst's leftovers.
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  const { heapUsed, rss: rssAtGc } = process.memoryUsage();
  // The freed pages go back from a background thread within milliseconds of the collection:
  // sample until two samples in a row agree.
  let rss = rssAtGc;
  for (let i = 0; i < RSS_SAMPLES; i++) {
    await delay(RSS_SAMPLE_MS);
    const next = process.memoryUsage.rss();
    if (next === rss) break;
    rss = next;
  }
  return { heapUsed, rss, rssAtGc };
}

async function sessions(): Promise<unknown> {
  const steady = await steadyAgent();
  // The baseline is a process in its steady state: the code optimised and the young generation
  // grown (both cost memory once, not per session), so the difference is the sessions' own.
  for (let i = 0; i < WARM_UP_TURNS; i++) {
    replied(await steady.agent.handleMessage({ sessionId: 'warm-up', content: `hello ${i}` }));
  }
  await steady.log.deleteSession('warm-up');
  await steady.app.get<InputInbox>(InputInbox).deleteSession('warm-up');
  const before = await settled();
  const started = performance.now();
  for (let at = 0; at < SESSIONS; at += AT_ONCE) {
    const batch: Promise<Settlement>[] = [];
    for (let i = at; i < Math.min(SESSIONS, at + AT_ONCE); i++) {
      batch.push(steady.agent.handleMessage({ sessionId: `s${i}`, content: 'hello' }));
    }
    const settlements = await Promise.all(batch);
    for (const settlement of settlements) replied(settlement);
  }
  const turnsMs = performance.now() - started;
  const after = await settled();
  await steady.close();
  return { before, after, turnsMs, modelCalls: steady.provider.calls };
}

/** The zero-latency model, but every chunk comes `CHUNK_DELAY_MS` after the previous one. */
class PacedProvider extends ZeroLatencyProvider {
  override async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk> {
    this.calls++;
    for (const chunk of answerChunks(request.messages)) {
      await delay(CHUNK_DELAY_MS);
      yield chunk;
    }
  }
}

/** The steady agent of `bench/support`, with the paced model and room for the big history. */
async function pacedAgent() {
  const steady = await steadyAgent({
    hostStore: true,
    provider: new PacedProvider(),
    // The whole history may take the budget (128k window - 4,096 - 512), so the 100k tokens
    // are sent, not dropped in segments at the default share of 0.6.
    trimming: { historyShare: 1 },
  });
  return {
    ...steady,
    sessions: steady.app.get<SessionStore>(SessionStore),
    events: steady.app.get(EventEmitter2),
  };
}

const WORDS = (
  'the a of and to in is that it was for on are as with his they at be this from have or by ' +
  'one had not but what all were when we there can an your which their said if do will each ' +
  'about how up out them then she many some so these would other into has more her two like ' +
  'him see time could no make than first been its who now people my made over did down only ' +
  'way find use may water long little very after words called just where most know get ' +
  'through back much before go good new write our used me man too any day same right look ' +
  'think also around another came come work three word must because does part even place ' +
  'well such here take why things help put years different away again off went old number ' +
  'great tell men say small every found still between name should home big give air line set ' +
  'own under read last never us left end along while might next sound below saw something ' +
  'thought both few those always looked show large often together asked house world going ' +
  'want school important until form food keep children feet land side without boy once ' +
  'animals life enough took sometimes four head above kind began almost live page got earth ' +
  'need far hand high year mother light parts country father let night following picture ' +
  'being study second eyes soon times story boys since white days ever paper hard near ' +
  'sentence better best across during today others however sure means knew try told young ' +
  'miles sun ways thing whole hear example heard several change answer room sea against top ' +
  'turned learn point city play toward five using himself usually money seen car morning ' +
  'invoice shipment contract quarterly warehouse schedule migration deployment database'
).split(' ');

/** Varied English-like text of about `chars` characters, seeded so every message differs. */
function prose(seed: number, chars: number, tag: string): string {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  const sentences: string[] = [];
  let length = 0;
  while (length < chars) {
    const words = Array.from({ length: 6 + Math.floor(next() * 14) }, () => {
      const word = WORDS[Math.floor(next() * WORDS.length)];
      return next() < 0.04 ? String(Math.floor(next() * 10_000)) : word;
    });
    words[0] = words[0][0].toUpperCase() + words[0].slice(1);
    const sentence = `${words.join(' ')}${next() < 0.15 ? '?' : '.'}`;
    sentences.push(sentence);
    length += sentence.length + 1;
  }
  return `${tag} ${sentences.join(' ')}`.slice(0, chars);
}

/**
 * Writes the big session's history straight through the archive: user/assistant pairs of
 * `BIG_MESSAGE_CHARS` characters until their texts reach `BIG_HISTORY_TOKENS` (counted with a
 * tiktoken encoder of this script's own, not the agent's). Returns messages and tokens.
 */
async function bigHistory(
  log: MemoryMessageLog,
  sessionId: string,
  session: number,
): Promise<{ messages: number; tokens: number; chars: number }> {
  const encoder = get_encoding('o200k_base');
  const rows: NewMessage[] = [];
  let tokens = 0;
  let chars = 0;
  try {
    for (let pair = 0; tokens < BIG_HISTORY_TOKENS; pair++) {
      for (const role of ['user', 'assistant'] as const) {
        const tag = `[session ${session}, ${role} message ${pair}]`;
        const content = prose(
          session * 100_003 + pair * 2 + (role === 'user' ? 0 : 1),
          BIG_MESSAGE_CHARS,
          tag,
        );
        tokens += encoder.encode_ordinary(content).length;
        chars += content.length;
        rows.push({ sessionId, role, content, metadata: {} });
      }
    }
  } finally {
    encoder.free();
  }
  await log.append(rows);
  return { messages: rows.length, tokens, chars };
}

const ms = (ns: number) => ns / 1e6;

/** Event-loop delay, utilisation and background turns over `run`, and what it returned. */
async function window<T>(background: { turns: number }, run: () => Promise<T>) {
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 1 });
  const turnsBefore = background.turns;
  const elu = performance.eventLoopUtilization();
  histogram.enable();
  // The histogram's first tick only starts its clock (it records the gap between ticks): a
  // turn that blocks the loop before that tick would go unseen, so it starts after two ticks.
  await delay(3);
  const started = performance.now();
  const value = await run();
  histogram.disable();
  const durationMs = performance.now() - started;
  return {
    value,
    figures: {
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      max: ms(histogram.max),
      samples: histogram.count,
      durationMs,
      utilisation: performance.eventLoopUtilization(elu).utilization,
      backgroundTurnsPerSecond: ((background.turns - turnsBefore) * 1000) / durationMs,
    },
  };
}

async function eventLoopDelay(): Promise<unknown> {
  const paced = await pacedAgent();
  const usage = new Map<string, TokenUsageEvent>();
  paced.events.on(AgentEvents.TokenUsage, (event: TokenUsageEvent) => {
    if (event.sessionId.startsWith('big')) usage.set(event.sessionId, event);
  });
  const counter = { turns: 0 };
  let running = true;
  const background = Array.from({ length: BACKGROUND }, async (_, i) => {
    while (running) {
      replied(await paced.agent.handleMessage({ sessionId: `bg${i}`, content: `question ${i}` }));
      counter.turns++;
    }
  });

  /** One turn of a new session whose whole ~100k-token history is sent uncounted. */
  const bigTurn = async (session: number) => {
    const sessionId = `big${session}`;
    await paced.sessions.ensure(sessionId, { historyLimit: 0 });
    const history = await bigHistory(paced.log, sessionId, session);
    const { value: settlement, figures } = await window(counter, () =>
      paced.agent.handleMessage({ sessionId, content: `hello from session ${session}` }),
    );
    replied(settlement);
    const sent = usage.get(sessionId);
    if (!sent || sent.trimmed || sent.historyMessages < history.messages) {
      throw new Error(`the big history was not sent whole: ${JSON.stringify(sent)}`);
    }
    await delay(200);
    const { historyMessages, untrimmedHistory } = sent;
    return { ...figures, history, sent: { historyMessages, untrimmedHistory } };
  };

  // Warm-up: the background sessions fill their windows, and one big turn, not measured,
  // compiles the counting and trimming paths before the measured ones.
  await delay(WARM_UP_MS);
  await bigTurn(0);
  const baseline = (await window(counter, () => delay(BASELINE_MS))).figures;
  const big = [];
  for (let session = 1; session <= BIG_TURNS; session++) big.push(await bigTurn(session));
  running = false;
  await Promise.all(background);
  // The same turns with nothing else running: what the big turn costs the loop by itself.
  const alone = [];
  for (let session = 1; session <= BIG_TURNS; session++) {
    alone.push(await bigTurn(BIG_TURNS + session));
  }
  await paced.app.close();
  return { baseline, big, alone };
}

async function main(): Promise<void> {
  const mode = process.argv[2];
  const result =
    mode === 'sessions' ? await sessions() : mode === 'delay' ? await eventLoopDelay() : undefined;
  if (result === undefined) throw new Error(`unknown mode ${mode}; use sessions or delay`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(
        `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      process.exit(1);
    },
  );
}
