import { context, propagation, trace, type Attributes } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-node';

/**
 * The OpenTelemetry SDK as a host registers it (AsyncLocalStorage context, W3C propagation),
 * exporting to memory: what the agent's spans look like to an exporter.
 */
export class SpanRecorder {
  readonly exporter = new InMemorySpanExporter();
  private readonly provider = new NodeTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  });

  static register(): SpanRecorder {
    const recorder = new SpanRecorder();
    recorder.provider.register();
    return recorder;
  }

  /** Finished spans, in the order they ended. */
  get spans(): ReadableSpan[] {
    return this.exporter.getFinishedSpans();
  }

  /** Finished spans of one name. */
  named(name: string): ReadableSpan[] {
    return this.spans.filter((s) => s.name === name);
  }

  /** The one finished span of a name whose attributes match. */
  one(name: string, attributes: Attributes = {}): ReadableSpan {
    const found = this.named(name).filter((s) =>
      Object.entries(attributes).every(([k, v]) => s.attributes[k] === v),
    );
    if (found.length !== 1) {
      throw new Error(
        `expected one ${name} span with ${JSON.stringify(attributes)}, found ${found.length}`,
      );
    }
    return found[0];
  }

  reset(): void {
    this.exporter.reset();
  }

  async unregister(): Promise<void> {
    await this.provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  }
}

/** The span id of a span's parent, or undefined for a root span. */
export function parentIdOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

/** Every string a span carries: attribute values, event names and event attribute values. */
export function stringsOf(span: ReadableSpan): string[] {
  const values = (attributes: Attributes | undefined) =>
    Object.values(attributes ?? {})
      .flatMap((v) => (Array.isArray(v) ? v : [v]))
      .map(String);
  return [
    span.name,
    ...values(span.attributes),
    ...span.events.flatMap((e) => [e.name, ...values(e.attributes)]),
    span.status.message ?? '',
  ];
}
