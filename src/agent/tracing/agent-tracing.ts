import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import {
  context,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import {
  activeIngress,
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
import { failed, traceModelCall, traceToolCall } from './call-spans';
import { recordSlowHook } from './hook-spans';
import {
  byAttributes,
  outcomeOf,
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
  private delegate?: TracerProvider;
  private cachedTracer?: Tracer;

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

  input(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement> {
    // Not async: with no SDK registered the work runs as if there were no layer.
    const tracer = this.tracer();
    return tracer ? this.tracedInput(tracer, info, run) : run();
  }

  turn(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion> {
    const tracer = this.tracer();
    return tracer ? this.tracedTurn(tracer, info, run) : run();
  }

  modelCall(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse> {
    const record = this.turns.get(info.turnId);
    const tracer = record && this.tracer();
    return tracer ? traceModelCall(tracer, record, info, run, this.options.traceContent) : run();
  }

  toolCall(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult> {
    const record = this.turns.get(info.turnId);
    const tracer = record && this.tracer();
    return tracer ? traceToolCall(tracer, record, info, run, this.options.traceContent) : run();
  }

  private async tracedInput(
    tracer: Tracer,
    info: InputInfo,
    run: () => Promise<Settlement>,
  ): Promise<Settlement> {
    // An input taken up again continues its trace; a new one starts under its ingress (an HTTP
    // server span of the host's instrumentation, say).
    const parent = info.traceparent ? contextOf(info.traceparent) : context.active();
    const attributes = inputAttributes(info);
    attributes['agent.input.ingress'] = activeIngress() ?? 'library';
    const span = tracer.startSpan(SPAN.input, { attributes }, parent);
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

  private async tracedTurn(
    tracer: Tracer,
    info: TurnInfo,
    run: () => Promise<TurnConclusion>,
  ): Promise<TurnConclusion> {
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
    if (!(provider instanceof ProxyTracerProvider)) return provider.getTracer(TRACER_NAME);
    // The global provider is a proxy whose delegate is the host's SDK once registered: the
    // tracer is looked up again only when the delegate changed.
    const delegate = provider.getDelegate();
    if (delegate !== this.delegate) {
      this.delegate = delegate;
      this.cachedTracer = provider.getDelegateTracer(TRACER_NAME);
    }
    return this.cachedTracer;
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

function inputAttributes(info: InputInfo): Attributes {
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
