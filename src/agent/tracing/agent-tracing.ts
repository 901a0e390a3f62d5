import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import {
  context,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import {
  contextOf,
  spanContextOf,
  traceparentOf,
  type ChatResponse,
  type IncomingMessage,
  type Settlement,
} from '../../contracts';
import { HookRegistry, type HookObserver, type SlowHookCall } from '../../hooks';
import { AGENT_OPTIONS } from '../agent.module-definition';
import type { ResolvedAgentOptions } from '../agent.options';
import {
  AgentInstrumentation,
  type InputInfo,
  type InstrumentationLayer,
  type JoinInfo,
  type ModelCallInfo,
  type StopInfo,
  type ToolCallInfo,
  type TurnConclusion,
  type TurnInfo,
} from '../instrumentation';
import type { ToolResult } from '../tools';
import { recordSlowHook } from './hook-spans';
import {
  answerAttributes,
  byAttributes,
  outcomeOf,
  outputMessages,
  settlementAttributes,
  SPAN,
  TRACER_NAME,
  type TurnRecord,
} from './span-attributes';

/**
 * Vendor-neutral tracing on the instrumentation seam, through `@opentelemetry/api` only: the
 * host registers the SDK and exporter; with none registered every method runs its work and
 * nothing else. One trace per input: `agent.input` (ingress to settlement), `invoke_agent` per
 * turn (child of its first opening input, linked to the others and to those that join),
 * `chat {model}` per model call and `execute_tool {name}` per tool call (children of their
 * turn), slow hook middleware as `agent.hook {hook}`. Span names and attributes follow the
 * OpenTelemetry GenAI conventions (interface.md section 8). No message content unless
 * `traceContent`; never an abort's or clearing's `reason`.
 */
@Injectable()
export class AgentTracing implements InstrumentationLayer, OnModuleInit, OnModuleDestroy {
  /** Live `agent.input` spans by input id. */
  private readonly inputs = new Map<string, Span>();
  /** Live `invoke_agent` spans by turn id. */
  private readonly turns = new Map<string, TurnRecord>();
  private removeLayer?: () => void;

  /** Slow middleware calls as spans, timed only while a tracer is registered. */
  private readonly hookObserver: HookObserver;

  constructor(
    private readonly instrumentation: AgentInstrumentation,
    private readonly hooks: HookRegistry,
    @Inject(AGENT_OPTIONS) private readonly options: ResolvedAgentOptions,
  ) {
    this.hookObserver = {
      active: () => this.tracer() !== undefined,
      thresholdMs: options.traceHookThresholdMs,
      slow: (call) => this.slowHook(call),
    };
  }

  onModuleInit(): void {
    this.removeLayer = this.instrumentation.use(this);
    this.hooks.observe(this.hookObserver);
  }

  onModuleDestroy(): void {
    this.removeLayer?.();
    this.hooks.observe(undefined);
  }

  async input(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement> {
    const tracer = this.tracer();
    if (!tracer) return run();
    // An input taken up again continues its trace; a new one starts under its ingress (an HTTP
    // server span of the host's instrumentation, say).
    const parent = info.traceparent ? contextOf(info.traceparent) : context.active();
    const span = tracer.startSpan(SPAN.input, { attributes: inputAttributes(info) }, parent);
    if (this.options.traceContent) span.setAttribute('agent.input.content', info.content);
    info.traceparent = traceparentOf(span.spanContext());
    this.inputs.set(info.id, span);
    try {
      const settlement = await context.with(trace.setSpan(parent, span), run);
      span.setAttributes(settlementAttributes(settlement));
      return settlement;
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      this.inputs.delete(info.id);
      span.end();
    }
  }

  async turn(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion> {
    const tracer = this.tracer();
    if (!tracer) return run();
    const [first, ...others] = info.inputs;
    const parent = first ? this.parentOf(first) : ROOT_CONTEXT;
    const links = others.map((m) => this.linkTo(m)).filter((l): l is Link => l !== undefined);
    const span = tracer.startSpan(
      SPAN.turn,
      {
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.conversation.id': info.sessionId,
          'agent.turn.id': info.turnId,
          'agent.turn.inputs.opened': info.opened,
          ...(info.source !== undefined ? { 'agent.turn.source': info.source } : {}),
        },
        links,
      },
      parent,
    );
    for (const other of others) this.inputs.get(other.id ?? '')?.addLink(linkOf(span));
    const record: TurnRecord = { span, joined: 0, modelCalls: 0, toolCalls: 0 };
    this.turns.set(info.turnId, record);
    try {
      const end = await context.with(trace.setSpan(parent, span), run);
      span.setAttribute('agent.turn.outcome', outcomeOf(end));
      if (end?.outcome === 'error')
        span.setStatus({ code: SpanStatusCode.ERROR, message: end.error });
      return end;
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      this.turns.delete(info.turnId);
      span.setAttributes({
        'agent.turn.inputs.joined': record.joined,
        'agent.turn.model_calls': record.modelCalls,
        'agent.turn.tool_calls': record.toolCalls,
      });
      span.end();
    }
  }

  async modelCall(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse> {
    const record = this.turns.get(info.turnId);
    const tracer = record && this.tracer();
    if (!record || !tracer) return run();
    record.modelCalls++;
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
      trace.setSpan(ROOT_CONTEXT, record.span),
    );
    if (this.options.traceContent) {
      span.setAttribute('gen_ai.input.messages', JSON.stringify(info.messages));
    }
    try {
      const response = await context.with(trace.setSpan(context.active(), span), run);
      span.setAttributes(answerAttributes(response));
      if (info.usage) {
        span.setAttributes({
          'agent.usage.used': info.usage.used,
          'agent.usage.trimmed': info.usage.trimmed,
        });
      }
      if (this.options.traceContent)
        span.setAttribute('gen_ai.output.messages', outputMessages(response));
      return response;
    } catch (error) {
      if (!info.signal.aborted) failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  async toolCall(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult> {
    const record = this.turns.get(info.turnId);
    const tracer = record && this.tracer();
    if (!record || !tracer) return run();
    record.toolCalls++;
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
      trace.setSpan(ROOT_CONTEXT, record.span),
    );
    if (this.options.traceContent) {
      span.setAttribute('gen_ai.tool.call.arguments', JSON.stringify(info.args ?? null));
    }
    try {
      const result = await context.with(trace.setSpan(context.active(), span), run);
      if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: result.content });
      if (this.options.traceContent) span.setAttribute('gen_ai.tool.call.result', result.content);
      return result;
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  joined(info: JoinInfo): void {
    const record = this.turns.get(info.turnId);
    if (!record) return;
    record.joined++;
    const link = this.linkTo(info.input);
    if (link) record.span.addLink(link);
    this.inputs.get(info.input.id ?? '')?.addLink(linkOf(record.span));
  }

  stopped(info: StopInfo): void {
    // The stop's `reason` stays out (S3: only the turn-end log line has it).
    this.turns.get(info.turnId)?.span.addEvent(`agent.${info.kind}`, byAttributes(info.by));
  }

  /** The registered tracer, or `undefined` when the host registered no SDK. */
  private tracer(): Tracer | undefined {
    const provider = trace.getTracerProvider();
    return provider instanceof ProxyTracerProvider
      ? provider.getDelegateTracer(TRACER_NAME)
      : provider.getTracer(TRACER_NAME);
  }

  /** A turn's parent: its input's live span here, else the span the input carried here. */
  private parentOf(input: IncomingMessage): Context {
    const local = this.inputs.get(input.id ?? '');
    return local ? trace.setSpan(ROOT_CONTEXT, local) : contextOf(input.traceparent);
  }

  private linkTo(input: IncomingMessage): Link | undefined {
    const local = this.inputs.get(input.id ?? '');
    if (local) return linkOf(local);
    const remote = spanContextOf(input.traceparent);
    return remote ? { context: remote } : undefined;
  }

  private slowHook(call: SlowHookCall): void {
    const tracer = this.tracer();
    if (!tracer) return;
    const turnId = (call.ctx as { turnId?: unknown } | undefined)?.turnId;
    const record = typeof turnId === 'string' ? this.turns.get(turnId) : undefined;
    const parent = record ? trace.setSpan(ROOT_CONTEXT, record.span) : context.active();
    recordSlowHook(tracer, call, parent);
  }
}

function inputAttributes(info: InputInfo) {
  return {
    'gen_ai.conversation.id': info.sessionId,
    'agent.input.id': info.id,
    ...(info.source !== undefined ? { 'agent.input.source': info.source } : {}),
    ...(info.messageId !== undefined ? { 'agent.input.message_id': info.messageId } : {}),
  };
}

function linkOf(span: Span): Link {
  return { context: span.spanContext() };
}

function failed(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  if (error instanceof Error) span.recordException(error);
}
