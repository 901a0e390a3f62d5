import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { ChatResponse } from '../../contracts';
import type { ModelCallInfo, ToolCallInfo } from '../instrumentation';
import type { ToolResult } from '../tools';
import { answerAttributes, outputMessages, SPAN, type TurnRecord } from './span-attributes';

/** A model call as `chat {model}`, a child of its turn's span. */
export async function traceModelCall(
  tracer: Tracer,
  record: TurnRecord,
  info: ModelCallInfo,
  run: () => Promise<ChatResponse>,
  withContent: boolean,
): Promise<ChatResponse> {
  record.modelCalls++;
  const parent = trace.setSpan(ROOT_CONTEXT, record.span);
  const span = tracer.startSpan(
    SPAN.chat(info.model),
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': info.provider,
        'gen_ai.request.model': info.model,
        'gen_ai.conversation.id': info.sessionId,
        'agent.turn.id': info.turnId,
      },
    },
    parent,
  );
  if (withContent) span.setAttribute('gen_ai.input.messages', JSON.stringify(info.messages));
  try {
    // Active for the call: retries become its events, a host's HTTP client spans its children.
    const response = await context.with(trace.setSpan(parent, span), run);
    span.setAttributes(answerAttributes(response));
    if (info.usage) {
      span.setAttributes({
        'agent.usage.used': info.usage.used,
        'agent.usage.trimmed': info.usage.trimmed,
      });
    }
    if (withContent) span.setAttribute('gen_ai.output.messages', outputMessages(response));
    return response;
  } catch (error) {
    // A stopped turn's call is not a failure.
    if (!info.signal.aborted) failed(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** A tool call as `execute_tool {name}`, a child of its turn's span; a failed tool is an error. */
export async function traceToolCall(
  tracer: Tracer,
  record: TurnRecord,
  info: ToolCallInfo,
  run: () => Promise<ToolResult>,
  withContent: boolean,
): Promise<ToolResult> {
  record.toolCalls++;
  const parent = trace.setSpan(ROOT_CONTEXT, record.span);
  const span = tracer.startSpan(
    SPAN.tool(info.name),
    {
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': info.name,
        'gen_ai.tool.call.id': info.callId,
        'gen_ai.conversation.id': info.sessionId,
        'agent.turn.id': info.turnId,
      },
    },
    parent,
  );
  if (withContent) {
    span.setAttribute('gen_ai.tool.call.arguments', JSON.stringify(info.args ?? null));
  }
  try {
    const result = await context.with(trace.setSpan(parent, span), run);
    if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: result.content });
    if (withContent) span.setAttribute('gen_ai.tool.call.result', result.content);
    return result;
  } catch (error) {
    failed(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** Marks a span failed with the error's message (and the exception as an event). */
export function failed(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  if (error instanceof Error) span.recordException(error);
}
