import { ConfigError, DEFAULT_SERVICE_NAME, loadAppConfig } from '../../src/app.config';

/** The ConfigError message `env` stops start-up with. */
function refusal(env: NodeJS.ProcessEnv): string {
  try {
    loadAppConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('loadAppConfig: LOG_FORMAT and tracing', () => {
  it('LOG_FORMAT: text by default, text or json when given', () => {
    expect(loadAppConfig({}).logFormat).toBe('text');
    expect(loadAppConfig({ LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadAppConfig({ LOG_FORMAT: ' text ' }).logFormat).toBe('text');
  });

  it.each(['JSON', 'pretty', 'yaml'])(
    'LOG_FORMAT=%s stops start-up with one line naming LOG_FORMAT',
    (value) => {
      expect(refusal({ LOG_FORMAT: value })).toBe(
        `LOG_FORMAT must be text or json, got "${value}"`,
      );
    },
  );

  it('no OTLP endpoint: no tracing, whatever other OTEL_* variables say', () => {
    expect(loadAppConfig({}).tracing).toBeUndefined();
    expect(
      loadAppConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing,
    ).toBeUndefined();
  });

  it('OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turns tracing on, with the default service name', () => {
    const endpoint = 'http://127.0.0.1:4318';

    expect(loadAppConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }).tracing).toEqual({
      serviceName: DEFAULT_SERVICE_NAME,
    });
    expect(loadAppConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint }).tracing).toEqual({
      serviceName: 'nest-agent-orchestrator',
    });
  });

  it('the service name: OTEL_SERVICE_NAME, else none of ours when OTEL_RESOURCE_ATTRIBUTES names it', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example:4318' };

    expect(loadAppConfig({ ...endpoint, OTEL_SERVICE_NAME: 'agents-eu' }).tracing).toEqual({
      serviceName: 'agents-eu',
    });
    const attributes = 'deployment.environment=prod, service.name=from-attributes';
    expect(loadAppConfig({ ...endpoint, OTEL_RESOURCE_ATTRIBUTES: attributes }).tracing).toEqual(
      {},
    );
  });

  it('OTEL_SDK_DISABLED=true keeps tracing off even with an endpoint', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' };

    expect(loadAppConfig(env).tracing).toBeUndefined();
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url', 'OTEL_EXPORTER_OTLP_ENDPOINT must be a URL'],
    [
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      'ftp://x',
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must use',
    ],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http/xml', 'OTEL_EXPORTER_OTLP_PROTOCOL must be'],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'udp', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be'],
  ])('%s=%s stops start-up with one line naming the variable', (name, value, message) => {
    expect(refusal({ [name]: value })).toContain(message);
  });

  it.each(['http/protobuf', 'http/json', 'grpc'])(
    'OTEL_EXPORTER_OTLP_PROTOCOL=%s is accepted',
    (protocol) => {
      const env = {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      };

      expect(loadAppConfig(env).tracing).toBeDefined();
    },
  );
});

describe('loadAppConfig: AGENT_APPROVAL_TIMEOUT_MS', () => {
  it('10 minutes by default, the value when given', () => {
    expect(loadAppConfig({}).limits.approvalTimeoutMs).toBe(600_000);
    expect(loadAppConfig({ AGENT_APPROVAL_TIMEOUT_MS: '30000' }).limits.approvalTimeoutMs).toBe(
      30_000,
    );
  });

  it.each(['0', 'ten', '-1'])('AGENT_APPROVAL_TIMEOUT_MS=%s stops start-up naming it', (value) => {
    expect(refusal({ AGENT_APPROVAL_TIMEOUT_MS: value })).toContain('AGENT_APPROVAL_TIMEOUT_MS');
  });
});

describe('loadAppConfig: AGENT_DB_PREPARE', () => {
  const pg = 'postgres://u@127.0.0.1:5432/db';

  it('PostgreSQL statements are prepared unless AGENT_DB_PREPARE=false (any case)', () => {
    expect(loadAppConfig({ AGENT_DB: pg }).db).toEqual({
      kind: 'postgres',
      url: pg,
      prepare: true,
    });
    expect(loadAppConfig({ AGENT_DB: pg, AGENT_DB_PREPARE: 'FALSE' }).db).toMatchObject({
      prepare: false,
    });
    expect(loadAppConfig({ AGENT_DB: pg, AGENT_DB_PREPARE: ' true ' }).db).toMatchObject({
      prepare: true,
    });
  });

  it.each(['yes', '0', 'off'])(
    'AGENT_DB_PREPARE=%s stops start-up with one line naming it, whatever the database',
    (value) => {
      const line = `AGENT_DB_PREPARE must be true or false, got "${value}"`;
      expect(refusal({ AGENT_DB: pg, AGENT_DB_PREPARE: value })).toBe(line);
      expect(refusal({ AGENT_DB_PREPARE: value })).toBe(line);
    },
  );
});
