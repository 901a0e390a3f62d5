import { Controller, Get, Inject } from '@nestjs/common';
import {
  HealthCheck,
  HealthCheckService,
  HealthIndicatorService,
  type HealthCheckResult,
} from '@nestjs/terminus';
import { HistoryStore, type HistoryStore as HistoryStorePort } from '../../contracts';
import { ModelRegistry } from '../../llm';

/** `GET /health`: liveness and readiness of the store and the model provider. */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    @Inject(HistoryStore) private readonly history: HistoryStorePort,
    private readonly models: ModelRegistry,
  ) {}

  @Get()
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    return this.health.check([() => this.store(), () => this.model()]);
  }

  private async store() {
    const indicator = this.indicators.check('store');
    try {
      await this.history.count('__health__');
      return indicator.up();
    } catch (error) {
      return indicator.down({ message: (error as Error).message });
    }
  }

  private async model() {
    const indicator = this.indicators.check('model');
    const providers = this.models.list();
    if (!providers.length) return indicator.up({ providers: 0, note: 'no model provider' });
    try {
      await Promise.all(providers.map((p) => (p.ping ? p.ping() : Promise.resolve())));
      return indicator.up({ providers: providers.map((p) => p.id) });
    } catch (error) {
      return indicator.down({ message: (error as Error).message });
    }
  }
}
