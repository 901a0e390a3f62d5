import type { NodeSDKConfiguration } from '@opentelemetry/sdk-node';

/** The server's tracing settings (`OTEL_*`, read by `loadAppConfig`). */
export interface TracingSettings {
  /** `OTEL_SERVICE_NAME`; absent when `OTEL_RESOURCE_ATTRIBUTES` names the service. */
  serviceName?: string;
}

/** A started OpenTelemetry SDK. */
export interface TracingSdk {
  /** Exports the spans not yet exported, then stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry Node SDK with the OTLP trace exporter that the standard `OTEL_*`
 * variables describe (`OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, `_PROTOCOL`: `http/protobuf` by
 * default, `http/json` or `grpc`, `_HEADERS`, `_TIMEOUT`, `OTEL_TRACES_SAMPLER`, ...), and
 * registers it with `@opentelemetry/api`, where the agent's spans go. Traces only: no metric
 * reader and no log processor (the server's metrics are at `/metrics`), no auto-instrumentation.
 * Call before the Nest application is created.
 */
export function startTracingSdk(settings: TracingSettings): TracingSdk {
  // Required here, not imported: a server without an OTLP endpoint never loads the SDK.
  type Sdk = typeof import('@opentelemetry/sdk-node');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { NodeSDK } = require('@opentelemetry/sdk-node') as Sdk;
  const configuration: Partial<NodeSDKConfiguration> = {
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
    ...(settings.serviceName !== undefined ? { serviceName: settings.serviceName } : {}),
  };
  const sdk = new NodeSDK(configuration);
  sdk.start();
  return sdk;
}
