import {
  Controller,
  Get,
  HttpStatus,
  Inject,
  Res,
  ServiceUnavailableException,
} from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import {
  HealthCheck,
  HealthCheckService,
  HealthIndicatorService,
  type HealthCheckResult,
} from '@nestjs/terminus';
import { SkipThrottle } from '@nestjs/throttler';
import { HistoryStore, type HistoryStore as HistoryStorePort } from '../../contracts';
import { ModelRegistry } from '../../llm';
import { THROTTLERS } from '../api.module-definition';
import { Public } from '../auth/auth.decorators';
import type { HttpResponse } from '../http/http-types';
import { AgentMetrics } from '../metrics/agent-metrics.service';
import { CachedProbe, SingleFlight, withTimeout } from './probe';

const messageOf = (error: unknown) => (error as Error)?.message ?? String(error);

/**
 * `GET /health`: liveness and readiness of the store, the queue and the model provider. Each
 * probe is bounded by `HEALTH_PROBE_TIMEOUT_MS` (a component that does not answer in time is
 * down, "timed out after 1.5 s"), so the answer comes within 2 s whatever hangs. The store is
 * asked on every check; a model provider's ping result stands `MODEL_PING_TTL_MS` (see
 * `CachedProbe`). Never rate limited: probes must not be turned away.
 */
@ApiTags('operations')
@Public()
@SkipThrottle({ [THROTTLERS.admin]: true, [THROTTLERS.public]: true })
@Controller('health')
export class HealthController {
  private readonly storeProbe = new SingleFlight<number>();
  private readonly pings = new Map<string, CachedProbe>();

  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    @Inject(HistoryStore) private readonly history: HistoryStorePort,
    private readonly models: ModelRegistry,
    private readonly activity: AgentMetrics,
  ) {}

  @Get()
  @HealthCheck()
  @ApiOperation({ summary: 'Liveness and readiness (store, queue, model provider)' })
  async check(@Res({ passthrough: true }) response: HttpResponse): Promise<HealthCheckResult> {
    try {
      return await this.health.check([() => this.store(), () => this.queue(), () => this.model()]);
    } catch (error) {
      // Down: 503 with the same report as when up, so probes and people read one shape.
      if (!(error instanceof ServiceUnavailableException)) throw error;
      response.status(HttpStatus.SERVICE_UNAVAILABLE);
      return error.getResponse() as HealthCheckResult;
    }
  }

  private async store() {
    const indicator = this.indicators.check('store');
    try {
      await withTimeout(this.storeProbe.run(() => this.history.count('__health__')));
      return indicator.up();
    } catch (error) {
      return indicator.down({ message: messageOf(error) });
    }
  }

  /** The in-process queue is up while the process runs; it reports what waits and runs. */
  private queue() {
    return this.indicators.check('queue').up({
      mode: 'in-process',
      waiting: this.activity.waiting,
      running: this.activity.runningTurns,
    });
  }

  private async model() {
    const indicator = this.indicators.check('model');
    const providers = this.models.list();
    if (!providers.length) return indicator.up({ providers: 0, note: 'no model provider' });
    const failures = await Promise.all(
      providers.map(async (provider) => {
        if (!provider.ping) return undefined;
        try {
          await withTimeout(this.pingOf(provider.id).run(() => provider.ping!()));
          return undefined;
        } catch (error) {
          return `${provider.id}: ${messageOf(error)}`;
        }
      }),
    );
    const down = failures.filter((failure) => failure !== undefined);
    if (down.length) return indicator.down({ message: down.join('; ') });
    return indicator.up({ providers: providers.map((p) => p.id) });
  }

  private pingOf(providerId: string): CachedProbe {
    let probe = this.pings.get(providerId);
    if (!probe) this.pings.set(providerId, (probe = new CachedProbe()));
    return probe;
  }
}
