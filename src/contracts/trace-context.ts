import {
  context,
  createContextKey,
  isSpanContextValid,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
} from '@opentelemetry/api';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The W3C `traceparent` of a span context (version 00). */
export function traceparentOf(span: SpanContext): string {
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${span.traceId}-${span.spanId}-${flags}`;
}

/**
 * The remote span context a `traceparent` names, or `undefined` for a malformed one or the
 * all-zero ids the format forbids. Written by hand (a regular expression): it needs no
 * propagator registered by the host, and an input carries only this one header.
 */
export function spanContextOf(traceparent: string | undefined): SpanContext | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match) return undefined;
  const [, traceId, spanId, flags] = match;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  const traceFlags = parseInt(flags, 16) & TraceFlags.SAMPLED;
  return { traceId, spanId, traceFlags, isRemote: true };
}

/** The `traceparent` of the span active now, if any (what a job or a message carries along). */
export function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan()?.spanContext();
  return span && isSpanContextValid(span) ? traceparentOf(span) : undefined;
}

/** A context whose parent span is the one `traceparent` names (the root context otherwise). */
export function contextOf(traceparent: string | undefined): Context {
  const span = spanContextOf(traceparent);
  return span ? trace.setSpanContext(ROOT_CONTEXT, span) : ROOT_CONTEXT;
}

/** Where an input came in: `rest`, `socket`, or a host's own (`library` when none said). */
export type InputIngress = 'rest' | 'socket' | (string & {});

const INGRESS = createContextKey('nest-agent-orchestrator.input.ingress');

/**
 * Runs `fn` (which hands an input to the agent) marked with its ingress, under the caller's
 * `traceparent` when the request brought one and no span is active yet (no HTTP
 * instrumentation of the host's took it up). The `agent.input` span names the ingress and
 * continues that trace. Without a registered OpenTelemetry context manager this is `fn()`.
 */
export function withIngress<T>(ingress: InputIngress, traceparent: unknown, fn: () => T): T {
  let active = context.active();
  if (typeof traceparent === 'string' && !trace.getSpan(active)) {
    const remote = spanContextOf(traceparent.trim());
    if (remote) active = trace.setSpanContext(active, remote);
  }
  return context.with(active.setValue(INGRESS, ingress), fn);
}

/** The ingress `withIngress` marked the active context with, if any. */
export function activeIngress(): InputIngress | undefined {
  return context.active().getValue(INGRESS) as InputIngress | undefined;
}
