import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import type { AgentDistribution } from '../../agent';
import { AgentBackend } from '../agent-backend';
import { AgentMetrics } from '../metrics/agent-metrics.service';
import { CachedProbe, SingleFlight, withTimeout } from './probe';

/** Distributed mode's health report (`AgentDistribution.health`). */
type DistributionHealth = Awaited<ReturnType<AgentDistribution['health']>>;

const messageOf = (error: unknown) => (error as Error)?.message ?? String(error);

/**
 * The agent's health for `@nestjs/terminus` (a host's own check, or the server's `/health`):
 * the history store, the queue and the model providers, each probe bounded by
 * `HEALTH_PROBE_TIMEOUT_MS` (a component that does not answer in time is down, "timed out
 * after 1.5 s"). The store is asked on every check, one query at a time however often it is
 * polled; a model provider's ping result stands `MODEL_PING_TTL_MS` (see `CachedProbe`).
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.agent.isHealthy('agent')]); }
 * ```
 */
@Injectable()
export class AgentHealthIndicator {
  private readonly storeProbe = new SingleFlight<number>();
  private readonly distributionProbe = new SingleFlight<DistributionHealth>();
  private readonly pings = new Map<string, CachedProbe>();

  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly backend: AgentBackend,
    private readonly activity: AgentMetrics,
  ) {}

  /** Store, queue, model and MCP servers in one result under `key`: down when any of the first three is. */
  async isHealthy(key = 'agent'): Promise<HealthIndicatorResult> {
    const parts = await Promise.all([this.store(), this.queue(), this.model()]);
    const details: HealthIndicatorResult = Object.assign({}, ...parts, this.mcp());
    const indicator = this.indicators.check(key);
    const down = Object.values(details).some((part) => part.status === 'down');
    return down ? indicator.down(details) : indicator.up(details);
  }

  /** The history store answers a query. */
  async store(key = 'store'): Promise<HealthIndicatorResult> {
    const indicator = this.indicators.check(key);
    try {
      await withTimeout(this.storeProbe.run(() => this.backend.history.count('__health__')));
      return indicator.up();
    } catch (error) {
      return indicator.down({ message: messageOf(error) });
    }
  }

  /**
   * The queue, with what waits and runs here. In-process it is up while the process runs.
   * Distributed, it names the instance and is down while Redis is unreachable (a connection not
   * ready, or no PING answer within a second) or the wake worker does not run.
   */
  async queue(key = 'queue'): Promise<HealthIndicatorResult> {
    const indicator = this.indicators.check(key);
    const activity = { waiting: this.activity.waiting, running: this.activity.runningTurns };
    const distribution = this.backend.distribution;
    if (!distribution?.instanceId) return indicator.up({ mode: 'in-process', ...activity });
    const instanceId = distribution.instanceId;
    try {
      const health = await withTimeout(this.distributionProbe.run(() => distribution.health()));
      const { up, ...details } = health!;
      const report = { mode: 'distributed', ...details, ...activity };
      return up ? indicator.up(report) : indicator.down(report);
    } catch (error) {
      return indicator.down({ mode: 'distributed', instanceId, message: messageOf(error) });
    }
  }

  /**
   * The MCP tool servers, each with its state (`connecting | ready | reconnecting | failed`),
   * tool count and last error. Always up: MCP servers are not needed for readiness (their tools
   * answer with an error while a server is away), so one that is down never fails `/health`.
   */
  mcp(key = 'mcp'): HealthIndicatorResult {
    const indicator = this.indicators.check(key);
    return indicator.up({ servers: this.backend.mcp?.status() ?? [] });
  }

  /** Every model provider that can be pinged answers (a registry without providers is up). */
  async model(key = 'model'): Promise<HealthIndicatorResult> {
    const indicator = this.indicators.check(key);
    const providers = this.backend.models.list();
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
