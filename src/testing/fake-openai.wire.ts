import type { ServerResponse } from 'node:http';
import { split } from './http-plumbing';
import type {
  FakeErrorScript,
  FakeRawScript,
  FakeTextScript,
  FakeToolCallsScript,
  FakeUsage,
} from './fake-openai.scripts';

/** The usage a script reports when it says nothing of usage. */
const DEFAULT_USAGE: FakeUsage = { prompt_tokens: 10, completion_tokens: 5 };

/** Answers with the status, headers and body of an error script (an OpenAI-style error by default). */
export function sendError(res: ServerResponse, script: FakeErrorScript): void {
  const body = script.body ?? {
    error: { message: `Fake error ${script.status}`, type: 'fake_error', param: null, code: null },
  };
  res.writeHead(script.status, { 'content-type': 'application/json', ...script.headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** The SSE `data:` payloads of a streamed answer, `[DONE]` included. */
export function streamEventsOf(
  script: FakeTextScript | FakeToolCallsScript | FakeRawScript,
  body: any,
  id: string,
): string[] {
  if ('raw' in script) {
    return script.raw.at(-1) === '[DONE]' ? [...script.raw] : [...script.raw, '[DONE]'];
  }
  const envelope = (choices: unknown[], usage?: unknown): string =>
    JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model: body.model ?? 'fake-model',
      choices,
      ...(usage ? { usage } : {}),
    });
  const choice = (delta: unknown, finish: string | null = null) => ({
    index: 0,
    delta,
    finish_reason: finish,
    logprobs: null,
  });
  const deltas = deltasOf(script);
  deltas[0] = { role: 'assistant', ...(deltas[0] ?? { content: '' }) };
  const events = deltas.map((delta) => envelope([choice(delta)]));
  events.push(envelope([choice({}, 'toolCalls' in script ? 'tool_calls' : 'stop')]));
  const usage = usageOf(script);
  if (usage && body.stream_options?.include_usage) events.push(envelope([], usage));
  events.push('[DONE]');
  return events;
}

/** The deltas of a text or tool-call script, in order (reasoning, text, tool calls). */
function deltasOf(script: FakeTextScript | FakeToolCallsScript): Record<string, unknown>[] {
  const deltas: Record<string, unknown>[] = [];
  if ('reasoning' in script && script.reasoning) {
    deltas.push({ content: null, reasoning_content: script.reasoning });
  }
  const chunks = 'chunks' in script ? script.chunks : undefined;
  for (const piece of split(script.text ?? '', chunks ?? 1)) deltas.push({ content: piece });
  if ('toolCalls' in script) {
    toolCallsOf(script).forEach((call, index) => {
      const { name } = call.function;
      deltas.push({
        tool_calls: [{ index, id: call.id, type: 'function', function: { name, arguments: '' } }],
      });
      for (const piece of split(call.function.arguments, 3)) {
        deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
      }
    });
  }
  return deltas;
}

/** The wire tool calls of a script (ids defaulted, arguments as JSON text). */
function toolCallsOf(script: FakeToolCallsScript) {
  return script.toolCalls.map((call, index) => ({
    id: call.id ?? `call_fake_${index + 1}`,
    type: 'function' as const,
    function: {
      name: call.name,
      arguments:
        typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    },
  }));
}

/** The wire usage of a script, or `undefined` when it reports none. */
function usageOf(script: FakeTextScript | FakeToolCallsScript): Required<FakeUsage> | undefined {
  const usage = script.usage === undefined ? DEFAULT_USAGE : script.usage;
  if (!usage) return undefined;
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

/** One non-streaming completion (`chat.completion`) for a script. */
export function completionOf(
  script: FakeTextScript | FakeToolCallsScript | FakeRawScript,
  body: any,
  id: string,
) {
  if ('raw' in script) return assembleRaw(script.raw, id);
  const toolCalls = 'toolCalls' in script ? toolCallsOf(script) : [];
  const reasoning = 'reasoning' in script ? script.reasoning : undefined;
  const message = {
    role: 'assistant',
    content: script.text ?? (toolCalls.length ? null : ''),
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const usage = usageOf(script);
  return {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model ?? 'fake-model',
    choices: [
      {
        index: 0,
        message,
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
        logprobs: null,
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

/** A completion assembled from raw stream lines (string content and reasoning, tool calls). */
function assembleRaw(lines: string[], id: string) {
  let content = '';
  let reasoning = '';
  let usage: unknown;
  let model = 'fake-model';
  const calls = new Map<number, { id: string; type: 'function'; function: any }>();
  for (const line of lines) {
    if (line === '[DONE]') continue;
    const chunk = JSON.parse(line);
    model = chunk.model || model;
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices?.[0]?.delta ?? {};
    if (typeof delta.content === 'string') content += delta.content;
    const thought = delta.reasoning_content ?? delta.reasoning;
    if (typeof thought === 'string') reasoning += thought;
    (delta.tool_calls ?? []).forEach((d: any, position: number) => {
      const index = d.index ?? position;
      const call = calls.get(index) ?? {
        id: '',
        type: 'function',
        function: { name: '', arguments: '' },
      };
      calls.set(index, call);
      if (d.id) call.id = d.id;
      if (d.function?.name) call.function.name = d.function.name;
      call.function.arguments += d.function?.arguments ?? '';
    });
  }
  const toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  const message = {
    role: 'assistant',
    content: content || (toolCalls.length ? null : ''),
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const finish = toolCalls.length ? 'tool_calls' : 'stop';
  const choices = [{ index: 0, message, finish_reason: finish, logprobs: null }];
  return { id, object: 'chat.completion', created: 0, model, choices, ...(usage ? { usage } : {}) };
}
