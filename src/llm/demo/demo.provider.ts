import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ModelCapabilities,
  ModelMessage,
  ProviderUsage,
  ToolCall,
  ToolSpec,
} from '../../contracts';
import { sleep } from '../retry';

/** The label every demo reply starts with. */
export const DEMO_LABEL = '[demo model]';
/** Name of the tool the demo model asks when the user wants the time. */
export const CLOCK_TOOL_NAME = 'clock';

/** Options of a {@link DemoProvider}. */
export interface DemoProviderOptions {
  /** Provider instance id. @default 'demo' */
  id?: string;
  /** Milliseconds between streamed words. @default 25 */
  wordDelayMs?: number;
}

/** Arguments of the {@link clockTool}. */
export interface ClockArgs {
  /** IANA time zone such as `Europe/Paris`; the server's zone when absent. */
  timeZone?: string;
}

/** What the {@link clockTool} returns. */
export interface ClockResult {
  /** Current time, ISO 8601 in UTC. */
  iso: string;
  /** The IANA time zone of `local`. */
  timeZone: string;
  /** The current time written out in that zone. */
  local: string;
}

/**
 * A built-in tool returning the current time: ISO 8601, the time zone and the local time. The
 * server registers it when the demo model is active, so the demo can show a tool call.
 */
export const clockTool: ToolSpec<ClockArgs> = {
  name: CLOCK_TOOL_NAME,
  description:
    'Returns the current date and time: ISO 8601 (UTC), the time zone, and the local time there.',
  parameters: {
    type: 'object',
    properties: {
      timeZone: {
        type: 'string',
        description: 'IANA time zone such as "Europe/Paris"; the server time zone when omitted.',
      },
    },
    additionalProperties: false,
  },
  timeoutMs: 5000,
  handler: (args: ClockArgs | undefined): ClockResult | { error: string } => {
    const now = new Date();
    const timeZone = args?.timeZone || Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
    try {
      const local = now.toLocaleString('en-GB', {
        timeZone,
        dateStyle: 'full',
        timeStyle: 'long',
      });
      return { iso: now.toISOString(), timeZone, local };
    } catch {
      return { error: `Unknown time zone "${timeZone}": use an IANA name such as Europe/Paris` };
    }
  },
};

/** Whether a user text asks for the time. */
const ASKS_TIME = /\btime\b|clock|几点|时间/i;
const GREETING = /^\s*(?:hi|hello|hey|hallo|bonjour|hola|你好|您好)\b/i;
const HELP = /\bhelp\b|what can you do|who are you/i;
const CONFIGURE = 'set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL) to talk to a real model';

/** What the demo model answers to one request. */
interface DemoAnswer {
  content: string;
  toolCalls?: ToolCall[];
}

/**
 * The built-in offline demo model (provider id `demo`, model `demo`): needs nothing installed
 * and no network. Every reply starts with "[demo model]". It streams its answer word by word,
 * echoes what it is told, and when the user asks for the time and a `clock` tool is offered, it
 * first calls that tool, then answers with its result: the whole pipeline, tool call included,
 * works with nothing configured. It serves only the model name `demo`.
 */
export class DemoProvider implements LlmProvider {
  readonly id: string;
  readonly defaultModel = 'demo';
  private readonly wordDelayMs: number;
  private calls = 0;

  constructor(options: DemoProviderOptions = {}) {
    this.id = options.id ?? 'demo';
    this.wordDelayMs = Math.max(0, options.wordDelayMs ?? 25);
  }

  capabilities(model: string): ModelCapabilities | undefined {
    if (model !== this.defaultModel) return undefined;
    return {
      contextWindow: 32_000,
      maxOutputTokens: 1024,
      vision: false,
      tools: true,
      reasoning: false,
      encoding: 'cl100k_base',
    };
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    throwIfAborted(request.signal);
    const answer = this.answer(request);
    return { ...answer, usage: usageOf(request.messages, answer.content) };
  }

  /** Streams the answer word by word, then the tool call (if any) and the usage. */
  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    throwIfAborted(request.signal);
    const answer = this.answer(request);
    const words = answer.content.match(/\S+\s*/g) ?? [];
    for (let i = 0; i < words.length; i++) {
      if (i > 0) await sleep(this.wordDelayMs, request.signal);
      throwIfAborted(request.signal);
      yield { contentDelta: words[i] };
    }
    if (answer.toolCalls) yield { toolCalls: answer.toolCalls };
    yield { usage: usageOf(request.messages, answer.content) };
  }

  async ping(): Promise<void> {}

  /** The canned answer to the conversation so far. */
  private answer(request: ChatRequest): DemoAnswer {
    const messages = request.messages;
    const lastUser = findLastIndex(messages, (m) => m.role === 'user');
    const question = lastUser >= 0 ? messages[lastUser].content : '';
    const clockResult = messages
      .slice(lastUser + 1)
      .find((m) => m.role === 'tool' && this.isClockCall(messages, m.toolCallId));
    if (clockResult) return { content: `${DEMO_LABEL} ${timeSentence(clockResult.content)}` };
    if (ASKS_TIME.test(question)) {
      if (request.tools?.some((tool) => tool.name === CLOCK_TOOL_NAME)) {
        return {
          content: `${DEMO_LABEL} Let me ask the clock tool.`,
          toolCalls: [
            {
              id: `demo_call_${++this.calls}`,
              type: 'function',
              function: { name: CLOCK_TOOL_NAME, arguments: '{}' },
            },
          ],
        };
      }
      return {
        content: `${DEMO_LABEL} The clock tool is not registered, but the server clock says ${new Date().toISOString()}.`,
      };
    }
    if (!question.trim()) return { content: `${DEMO_LABEL} I have nothing to answer yet.` };
    if (GREETING.test(question) || HELP.test(question)) {
      return {
        content: `${DEMO_LABEL} Hello! I am the built-in offline demo model: I echo what you write and can tell the time with the clock tool. To chat with a real model, set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL).`,
      };
    }
    return {
      content: `${DEMO_LABEL} You said: "${shorten(question.trim(), 200)}". I am the offline demo model, so I only echo; ${CONFIGURE}.`,
    };
  }

  /** Whether `toolCallId` names a `clock` call of an assistant message in `messages`. */
  private isClockCall(messages: ModelMessage[], toolCallId: string | undefined): boolean {
    if (!toolCallId) return false;
    return messages.some((m) =>
      m.toolCalls?.some((c) => c.id === toolCallId && c.function.name === CLOCK_TOOL_NAME),
    );
  }
}

/** The answer sentence for a clock tool result (JSON of a {@link ClockResult}, else as is). */
function timeSentence(result: string): string {
  try {
    const parsed = JSON.parse(result) as Partial<ClockResult> & { error?: string };
    if (parsed.error) return `The clock tool failed: ${parsed.error}.`;
    if (parsed.iso) {
      const local = parsed.local ? `${parsed.local} ` : '';
      return `The clock tool says it is ${local}(${parsed.iso}, time zone ${parsed.timeZone ?? 'UTC'}).`;
    }
  } catch {
    // Not JSON: quote it.
  }
  return `The clock tool says: ${shorten(result, 200)}.`;
}

function shorten(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function findLastIndex<T>(items: readonly T[], match: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (match(items[i])) return i;
  return -1;
}

/** Rough token counts (four characters a token). */
function usageOf(messages: ModelMessage[], reply: string): ProviderUsage {
  const chars = messages.reduce((sum, m) => sum + m.content.length, 0);
  const promptTokens = Math.ceil(chars / 4);
  const completionTokens = Math.ceil(reply.length / 4);
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
}

/** An abort as `fetch` reports one. */
function throwIfAborted(signal: AbortSignal): void {
  if (!signal.aborted) return;
  const error = new Error('The demo model was stopped');
  error.name = 'AbortError';
  throw error;
}
