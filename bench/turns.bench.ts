/**
 * Turn overhead benchmark: full turns through `AgentService.handleMessage` (hooks, prompt
 * assembly, history, token accounting, tool loop, persistence in memory, events) against a
 * bare loop that makes the same model calls through the same provider and consumes the same
 * streams, both talking to one local OpenAI-compatible HTTP server in the same run.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitterModule } from '@nestjs/event-emitter';
import {
  AgentModule,
  AgentService,
  OpenAiCompatibleProvider,
  ToolRegistry,
  type ChatRequest,
  type ModelMessage,
} from '../src';
import { FakeOpenAiServer } from '../src/testing';
import { median } from './support/stats';

const RUNS = 5;
const TURNS = 100;

async function drain(provider: OpenAiCompatibleProvider, request: ChatRequest): Promise<void> {
  for await (const chunk of provider.stream(request)) void chunk;
}

/** The same calls without the agent: text turns, or a tool call then a text answer. */
async function bareLoop(provider: OpenAiCompatibleProvider, tool: boolean): Promise<void> {
  const history: ModelMessage[] = [{ role: 'system', content: 'You are a helpful assistant.' }];
  for (let i = 0; i < TURNS; i++) {
    history.push({ role: 'user', content: `question ${i}` });
    const signal = new AbortController().signal;
    await drain(provider, { model: 'bench', messages: history, signal });
    if (tool) await drain(provider, { model: 'bench', messages: history, signal });
    history.push({ role: 'assistant', content: 'answer' });
  }
}

async function agentLoop(agent: AgentService, sessionId: string): Promise<void> {
  for (let i = 0; i < TURNS; i++) {
    await agent.handleMessage({ sessionId, content: `question ${i}` });
  }
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Runs the benchmark; returns its markdown section. */
export async function benchTurns(): Promise<string> {
  const server = await FakeOpenAiServer.start();
  const provider = new OpenAiCompatibleProvider({
    baseURL: server.url,
    defaultModel: 'bench',
    maxRetries: 0,
  });
  @Module({
    imports: [
      EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }),
      AgentModule.forRoot({ llmProvider: provider, historyLimit: 50 }),
    ],
  })
  class BenchModule {}
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: false });
  const agent = app.get(AgentService);
  app.get(ToolRegistry).register({
    name: 'lookup',
    description: 'looks something up',
    parameters: { type: 'object', properties: { q: { type: 'string' } } },
    handler: () => 'result',
  });
  const rows: string[] = [];
  try {
    for (const tool of [false, true]) {
      const script = () =>
        tool
          ? [
              { toolCalls: [{ name: 'lookup', arguments: { q: 'x' } }] },
              { text: 'answer', chunks: 4 },
            ]
          : [{ text: 'answer', chunks: 4 }];
      const bare: number[] = [];
      const full: number[] = [];
      for (let run = 0; run < RUNS; run++) {
        for (let i = 0; i < TURNS; i++) server.enqueue(...script());
        bare.push(await timed(() => bareLoop(provider, tool)));
        for (let i = 0; i < TURNS; i++) server.enqueue(...script());
        full.push(await timed(() => agentLoop(agent, `bench-${tool}-${run}`)));
      }
      const b = median(bare) / TURNS;
      const f = median(full) / TURNS;
      rows.push(
        `| ${tool ? 'tool call + answer (2 model calls)' : 'text answer (1 model call)'} | ${b.toFixed(2)} | ${f.toFixed(2)} | ${(f - b).toFixed(2)} | ${(f / b).toFixed(2)}x |`,
      );
    }
  } finally {
    await app.close();
    await server.close();
  }
  return [
    `### Turn overhead (${TURNS} sequential turns per run, median of ${RUNS} runs, in-memory stores)`,
    '',
    'Baseline: a bare loop making the same streamed model calls through the same provider to the same local',
    'OpenAI-compatible HTTP server. The agent adds hooks, prompt assembly, history, token accounting,',
    'the tool loop, persistence and events.',
    '',
    '| turn | bare loop ms/turn | agent ms/turn | added ms/turn | ratio |',
    '|---|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}
