/**
 * Peer frameworks doing the steady turn of issue 15 (see `../support/zero-latency.ts`) side by
 * side with this project, in one process: the bare loop (baseline), this project, the Vercel AI
 * SDK (`streamText`) and LangGraph (`createReactAgent`). Every implementation gets the same
 * zero-latency model answers (`answerChunks`: a `lookup` tool call, then a text streamed in
 * chunks), runs the same tool and keeps a history window of `HISTORY_LIMIT` messages.
 *
 * The peer packages live in this folder's own package (`bench/peers/package.json`), so the main
 * install stays lean; `bench/peers.section.ts` installs them on demand for `npm run bench`.
 *
 * Run alone from the repository root:
 *   node -r @swc-node/register -e "require('./bench/peers/peers.bench.ts').benchPeers().then(console.log)"
 * (`PEERS_TURNS=20` in front makes a quick check run.)
 */
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BindToolsInput,
} from '@langchain/core/language_models/chat_models';
import { AIMessageChunk, HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type ChatResult } from '@langchain/core/outputs';
import { tool as langchainTool } from '@langchain/core/tools';
import { convertToOpenAITool } from '@langchain/core/utils/function_calling';
import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { stepCountIs, streamText, tool as aiTool, type ModelMessage as AiMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import type { ModelMessage } from '../../src';
import {
  HISTORY_LIMIT,
  LOOKUP_TOOL,
  WARM_UP_TURNS,
  ZeroLatencyProvider,
  answerChunks,
  bareTurn,
  steadyAgent,
} from '../support/zero-latency';
import { median } from '../support/stats';

/** Repetitions; the table shows the median of their p50 and p99. */
const REPETITIONS = 5;
/**
 * Measured turns per implementation and repetition (`PEERS_TURNS` overrides, for a quick run; a
 * multiple of `BLOCK`).
 */
const TURNS = Number(process.env.PEERS_TURNS ?? 200);
/**
 * Interleaved turns per implementation before the first repetition, so every implementation is
 * measured optimised, as in a running server (V8 tiers code up only after many calls; a few
 * hundred turns still measure partly unoptimised code). `PEERS_WARM_UP` overrides.
 */
const WARM_UP_ROUNDS = Number(process.env.PEERS_WARM_UP ?? 1_500);
/** Turns an implementation runs in a row before the next one's (divides the turn counts). */
const BLOCK = 20;
/** The system prompt of the steady agent, with its one prompt contribution appended. */
const SYSTEM =
  'You are a helpful assistant. Answer briefly and look things up first.\n\n' +
  'Keep answers under three sentences.';
const PACKAGES = ['ai', '@ai-sdk/provider', '@langchain/langgraph', '@langchain/core', 'zod'];

/** The text the model streams after the tool result. */
const ANSWER = [...answerChunks([{ role: 'tool', toolCallId: 'x', content: '' }])]
  .map((chunk) => chunk.contentDelta ?? '')
  .join('');

/** What the zero-latency model answers, given the role of the last message of its prompt. */
function modelAnswer(lastIsTool: boolean) {
  return answerChunks(
    lastIsTool ? [{ role: 'tool', toolCallId: '', content: '' }] : [{ role: 'user', content: '' }],
  );
}

/** One implementation of the steady turn. */
interface Implementation {
  name: string;
  /** Runs one turn; resolves with the final text. */
  turn(question: string): Promise<string>;
  /** Starts a new session (an empty history). */
  fresh(): void;
  /** Tool executions and model calls so far. */
  counts(): { tool: number; model: number };
  close?(): Promise<void>;
}

function cut<T>(history: T[]): void {
  if (history.length > HISTORY_LIMIT) history.splice(0, history.length - HISTORY_LIMIT);
}

function bare(): Implementation {
  const provider = new ZeroLatencyProvider();
  let history: ModelMessage[] = [];
  return {
    name: 'bare loop (baseline)',
    async turn(question) {
      await bareTurn(provider, history, question);
      const last = history[history.length - 1];
      return typeof last.content === 'string' ? last.content : '';
    },
    fresh: () => (history = []),
    // The model answers with text only after a tool result: two calls mean the tool ran.
    counts: () => ({ tool: provider.calls / 2, model: provider.calls }),
  };
}

async function ours(): Promise<Implementation> {
  const steady = await steadyAgent();
  let session = 0;
  return {
    name: 'this project (`handleMessage`)',
    async turn(question) {
      const settlement = await steady.agent.handleMessage({
        sessionId: `peers-${session}`,
        content: question,
      });
      if (settlement.settled !== 'turn') throw new Error(`turn not run: ${settlement.settled}`);
      return settlement.reply ?? '';
    },
    fresh: () => void session++,
    counts: () => ({ tool: steady.provider.calls / 2, model: steady.provider.calls }),
    close: () => steady.close(),
  };
}

/**
 * AI SDK: its documented test model, `MockLanguageModelV3` from `ai/test`, whose `doStream`
 * turns the zero-latency answers into LanguageModelV3 stream parts (a `tool-call` part, or
 * `text-start` / `text-delta` x8 / `text-end`, then `finish` with usage), pulled lazily.
 */
function aiSdk(): Implementation {
  let tool = 0;
  let model = 0;
  const mock = new MockLanguageModelV3({
    modelId: 'zero-latency',
    doStream: async ({ prompt }) => {
      model++;
      const parts = v3Parts(prompt[prompt.length - 1]?.role === 'tool');
      return {
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          pull(controller) {
            const next = parts.next();
            if (next.done) controller.close();
            else controller.enqueue(next.value);
          },
        }),
      };
    },
  });
  const tools = {
    lookup: aiTool({
      description: LOOKUP_TOOL.description,
      inputSchema: z.object({ q: z.string().describe('the question') }),
      execute: async () => {
        tool++;
        return String(LOOKUP_TOOL.handler());
      },
    }),
  };
  let messages: AiMessage[] = [];
  return {
    name: 'AI SDK `streamText`',
    async turn(question) {
      messages.push({ role: 'user', content: question });
      const result = streamText({
        model: mock,
        system: SYSTEM,
        messages,
        tools,
        stopWhen: stepCountIs(2),
      });
      let text = '';
      for await (const part of result.fullStream) {
        if (part.type === 'text-delta') text += part.text;
        else if (part.type === 'error') throw part.error;
      }
      messages.push(...(await result.response).messages);
      cut(messages);
      // The mock keeps every call's options: drop them so the steady state does not grow.
      mock.doStreamCalls.length = 0;
      return text;
    },
    fresh: () => (messages = []),
    counts: () => ({ tool, model }),
  };
}

function* v3Parts(lastIsTool: boolean): Generator<LanguageModelV3StreamPart> {
  yield { type: 'stream-start', warnings: [] };
  let usage;
  let text = false;
  let calls = false;
  for (const chunk of modelAnswer(lastIsTool)) {
    for (const call of chunk.toolCalls ?? []) {
      calls = true;
      yield {
        type: 'tool-call',
        toolCallId: call.id,
        toolName: call.function.name,
        input: call.function.arguments,
      };
    }
    if (chunk.contentDelta) {
      if (!text) yield { type: 'text-start', id: 'text' };
      text = true;
      yield { type: 'text-delta', id: 'text', delta: chunk.contentDelta };
    }
    usage = chunk.usage ?? usage;
  }
  if (text) yield { type: 'text-end', id: 'text' };
  yield {
    type: 'finish',
    finishReason: { unified: calls ? 'tool-calls' : 'stop', raw: undefined },
    usage: {
      inputTokens: {
        total: usage?.promptTokens,
        noCache: undefined,
        cacheRead: undefined,
        cacheWrite: undefined,
      },
      outputTokens: { total: usage?.completionTokens, text: undefined, reasoning: undefined },
    },
  };
}

interface ZeroCallOptions extends BaseChatModelCallOptions {
  tools?: ReturnType<typeof convertToOpenAITool>[];
}

/**
 * LangGraph: a `BaseChatModel` subclass streaming the zero-latency answers as `AIMessageChunk`s
 * (tool calls as `tool_call_chunks`, usage on the last chunk), reporting each chunk through
 * `handleLLMNewToken` as chat model integrations do; `bindTools` converts the tools to OpenAI
 * function schemas and binds them, as a provider integration does.
 */
class ZeroLatencyChatModel extends BaseChatModel<ZeroCallOptions> {
  calls = 0;

  _llmType(): string {
    return 'zero-latency';
  }

  override bindTools(tools: BindToolsInput[], kwargs?: Partial<ZeroCallOptions>) {
    return this.withConfig({ ...kwargs, tools: tools.map((t) => convertToOpenAITool(t)) });
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    _options: this['ParsedCallOptions'],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    this.calls++;
    const lastIsTool = messages[messages.length - 1]?.getType() === 'tool';
    for (const chunk of modelAnswer(lastIsTool)) {
      const text = chunk.contentDelta ?? '';
      const generation = new ChatGenerationChunk({
        text,
        message: new AIMessageChunk({
          content: text,
          tool_call_chunks: chunk.toolCalls?.map((call, index) => ({
            type: 'tool_call_chunk' as const,
            id: call.id,
            name: call.function.name,
            args: call.function.arguments,
            index,
          })),
          usage_metadata: chunk.usage && {
            input_tokens: chunk.usage.promptTokens ?? 0,
            output_tokens: chunk.usage.completionTokens ?? 0,
            total_tokens: (chunk.usage.promptTokens ?? 0) + (chunk.usage.completionTokens ?? 0),
          },
        }),
      });
      yield generation;
      await runManager?.handleLLMNewToken(text, undefined, undefined, undefined, undefined, {
        chunk: generation,
      });
    }
  }

  async _generate(
    messages: BaseMessage[],
    options: this['ParsedCallOptions'],
    runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    let all: ChatGenerationChunk | undefined;
    for await (const chunk of this._streamResponseChunks(messages, options, runManager)) {
      all = all ? all.concat(chunk) : chunk;
    }
    return { generations: all ? [all] : [] };
  }
}

function langGraph(): Implementation {
  let tool = 0;
  const llm = new ZeroLatencyChatModel({});
  const lookup = langchainTool(
    async () => {
      tool++;
      return String(LOOKUP_TOOL.handler());
    },
    {
      name: LOOKUP_TOOL.name,
      description: LOOKUP_TOOL.description,
      schema: z.object({ q: z.string().describe('the question') }),
    },
  );
  const agent = createReactAgent({ llm, tools: [lookup], prompt: SYSTEM });
  let history: BaseMessage[] = [];
  return {
    name: 'LangGraph `createReactAgent`',
    async turn(question) {
      const stream = await agent.stream(
        { messages: [...history, new HumanMessage(question)] },
        { streamMode: ['messages', 'values'] },
      );
      let text = '';
      let state: BaseMessage[] | undefined;
      for await (const [mode, payload] of stream) {
        if (mode === 'values') {
          state = payload.messages;
        } else {
          const [message] = payload;
          if (AIMessageChunk.isInstance(message)) text += message.text;
        }
      }
      if (!state) throw new Error('LangGraph gave no final state');
      history = state.slice(-HISTORY_LIMIT);
      return text;
    },
    fresh: () => (history = []),
    counts: () => ({ tool, model: llm.calls }),
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}

function version(name: string): string {
  const file = join(__dirname, 'node_modules', name, 'package.json');
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

/** Runs the implementations interleaved; returns the markdown section. */
export async function benchPeers(): Promise<string> {
  const impls = [bare(), await ours(), aiSdk(), langGraph()];
  let questions = 0;
  const ask = () => `question ${++questions}`;
  try {
    // The first turn of each must really do the turn: the tool ran once, the text is the answer.
    for (const impl of impls) {
      const text = await impl.turn(ask());
      const { tool, model } = impl.counts();
      if (tool !== 1 || model !== 2 || text !== ANSWER) {
        throw new Error(
          `${impl.name}: first turn ran the tool ${tool}x, the model ${model}x, answered ${JSON.stringify(text)}`,
        );
      }
    }
    // A round gives every implementation `BLOCK` turns in a row, the starting one rotating so
    // none always follows the same neighbour. In blocks, not turn by turn: a turn then pays
    // for its own garbage, not for the collection of a neighbour's (turn by turn, the bare
    // loop measured 5x and this project 3x their own cost), while a slower or faster spell of
    // the machine still falls on all of them alike.
    const round = async (r: number, samples?: number[][]) => {
      for (let k = 0; k < impls.length; k++) {
        const i = (r + k) % impls.length;
        for (let t = 0; t < BLOCK; t++) {
          const question = ask();
          const started = process.hrtime.bigint();
          await impls[i].turn(question);
          const elapsed = Number(process.hrtime.bigint() - started) / 1e3;
          samples?.[i].push(elapsed);
        }
      }
    };
    for (let r = 0; r < WARM_UP_ROUNDS / BLOCK; r++) await round(r);
    const p50s: number[][] = impls.map(() => []);
    const p99s: number[][] = impls.map(() => []);
    for (let rep = 0; rep < REPETITIONS; rep++) {
      // Each repetition opens new sessions and fills their window before measuring, so every
      // repetition measures sessions of the same length.
      for (const impl of impls) impl.fresh();
      for (let r = 0; r < WARM_UP_TURNS / BLOCK; r++) await round(r);
      const samples: number[][] = impls.map(() => []);
      for (let r = 0; r < TURNS / BLOCK; r++) await round(r, samples);
      samples.forEach((values, i) => {
        const sorted = values.sort((a, b) => a - b);
        p50s[i].push(percentile(sorted, 0.5));
        p99s[i].push(percentile(sorted, 0.99));
      });
    }
    // Every turn, not only the first, ran the tool once and the model twice.
    const turns = 1 + WARM_UP_ROUNDS + REPETITIONS * (WARM_UP_TURNS + TURNS);
    for (const impl of impls) {
      const { tool, model } = impl.counts();
      if (tool !== turns || model !== 2 * turns) {
        throw new Error(`${impl.name}: ${turns} turns ran the tool ${tool}x, the model ${model}x`);
      }
    }
    const p50 = p50s.map(median);
    const p99 = p99s.map(median);
    const rows = impls.map(
      (impl, i) =>
        `| ${impl.name} | ${p50[i].toFixed(0)} | ${p99[i].toFixed(0)} | ` +
        `${(p50[i] / p50[0]).toFixed(1)}x | ${i === 0 ? '-' : `${(p50[i] / p50[1]).toFixed(2)}x`} |`,
    );
    return [
      `### Peer frameworks, same steady turn (${TURNS} turns per repetition, median of ${REPETITIONS})`,
      '',
      `One process, the implementations taking turns in blocks of ${BLOCK} turns (rotating order), after`,
      `${WARM_UP_ROUNDS} warm-up turns each. Each repetition opens a new session per implementation`,
      `and runs ${WARM_UP_TURNS} unmeasured turns to fill its window, then ${TURNS} measured turns.`,
      'The steady turn: a zero-latency streaming model in process answering a `lookup` tool call,',
      `then a text in 8 chunks; a ${HISTORY_LIMIT}-message history window; the whole stream consumed.`,
      'This project also runs its five no-op hooks and one prompt contribution (the peers get the',
      'same system text) and archives every message in its memory log; the peers keep their',
      `history in a plain array cut to ${HISTORY_LIMIT} messages, as the bare loop does. Wall time per turn.`,
      '',
      '| implementation | p50 µs | p99 µs | p50 vs bare | p50 vs this project |',
      '|---|---:|---:|---:|---:|',
      ...rows,
      '',
      `Versions: ${PACKAGES.map((name) => `\`${name}@${version(name)}\``).join(', ')}; ` +
        `Node ${process.version}.`,
      "Reproduce: `node -r @swc-node/register -e \"require('./bench/peers/peers.bench.ts')" +
        '.benchPeers().then(console.log)"` (after `npm ci --prefix bench/peers`).',
    ].join('\n');
  } finally {
    for (const impl of impls) await impl.close?.();
  }
}
