import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { OnEvent } from '@nestjs/event-emitter';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ModelCallInfo } from '../../agent';
import type {
  ChatResponse,
  OutgoingMessage,
  QueueEvent,
  TokenUsageEvent,
  TurnEndEvent,
  TurnStartEvent,
} from '../../contracts';
import { AgentBackend } from '../agent-backend';
import { API_OPTIONS, type ResolvedApiOptions } from '../api.module-definition';

const SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The counters and histograms, registered on `registry`. */
function createMetrics(registry: Registry) {
  const turns = new Counter({
    name: 'agent_turns_total',
    help: 'Turns ended, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });

  const turnSeconds = new Histogram({
    name: 'agent_turn_duration_seconds',
    help: 'Turn duration from start to end, by outcome',
    labelNames: ['outcome'] as const,
    buckets: SECONDS,
    registers: [registry],
  });

  const modelCallSeconds = new Histogram({
    name: 'agent_model_call_duration_seconds',
    help: 'Model call duration (whole answer, streamed or not), by provider and status',
    labelNames: ['provider', 'status'] as const,
    buckets: SECONDS,
    registers: [registry],
  });

  const tokens = new Counter({
    name: 'agent_tokens_total',
    help: 'Tokens of model calls: prompt (reported, else estimated: token:usage used), completion (reported)',
    labelNames: ['kind'] as const,
    registers: [registry],
  });

  const replies = new Counter({
    name: 'agent_outbound_messages_total',
    help: 'Messages sent to sessions, by source (agent reply or system notice)',
    labelNames: ['source'] as const,
    registers: [registry],
  });
  return { turns, turnSeconds, modelCallSeconds, tokens, replies };
}

/** A turn that has started and not ended. */
interface RunningTurn {
  sessionId: string;
  startedAt: number;
}

/**
 * Prometheus metrics of the agent, registered on the registry the host passes
 * (`metricsRegistry`), else on one of this module's own (not prom-client's global one, so
 * several applications in one process do not clash), fed by the agent's events. It also
 * knows what runs and waits right now, for the health check. Listeners only count: they never
 * throw into, nor wait inside, the turn that emits.
 */
@Injectable()
export class AgentMetrics implements OnModuleInit, OnModuleDestroy {
  /** The registry the metrics are registered on (the server's `/metrics` serves it). */
  readonly registry: Registry;

  private readonly running = new Map<string, RunningTurn>();
  private readonly waitingBySession = new Map<string, number>();
  private readonly unobserve: (() => void)[] = [];
  private readonly turns: Counter<'outcome'>;
  private readonly turnSeconds: Histogram<'outcome'>;
  private readonly modelCallSeconds: Histogram<'provider' | 'status'>;
  private readonly tokens: Counter<'kind'>;
  private readonly replies: Counter<'source'>;

  constructor(
    private readonly backend: AgentBackend,
    @Inject(API_OPTIONS) options: ResolvedApiOptions,
  ) {
    this.registry = options.metricsRegistry ?? new Registry();
    ({
      turns: this.turns,
      turnSeconds: this.turnSeconds,
      modelCallSeconds: this.modelCallSeconds,
      tokens: this.tokens,
      replies: this.replies,
    } = createMetrics(this.registry));
    const gauge = (name: string, help: string, read: () => number) => {
      const metric: Gauge = new Gauge({
        name,
        help,
        registers: [this.registry],
        collect: () => metric.set(read()),
      });
    };
    gauge(
      'agent_waiting_inputs',
      'Inputs waiting (queued or pending insertion) in all sessions',
      () => this.waiting,
    );
    gauge('agent_running_turns', 'Turns running now', () => this.runningTurns);
    gauge(
      'agent_active_sessions',
      'Sessions with a running turn or waiting inputs',
      () => this.activeSessions,
    );
    for (const outcome of ['replied', 'silent', 'aborted', 'error']) this.turns.inc({ outcome }, 0);
    for (const kind of ['prompt', 'completion']) this.tokens.inc({ kind }, 0);
  }

  onModuleInit(): void {
    this.unobserve.push(
      this.backend.instrumentation.use({ modelCall: (info, run) => this.timeModelCall(info, run) }),
    );
  }

  onModuleDestroy(): void {
    for (const off of this.unobserve.splice(0)) off();
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Inputs waiting in all sessions. */
  get waiting(): number {
    let total = 0;
    for (const count of this.waitingBySession.values()) total += count;
    return total;
  }

  /** Turns running now. */
  get runningTurns(): number {
    return this.running.size;
  }

  /** Sessions with a running turn or waiting inputs. */
  get activeSessions(): number {
    const sessions = new Set(this.waitingBySession.keys());
    for (const turn of this.running.values()) sessions.add(turn.sessionId);
    return sessions.size;
  }

  @OnEvent('agent:turn:start')
  onTurnStart(event: TurnStartEvent): void {
    this.running.set(event.turnId, { sessionId: event.sessionId, startedAt: performance.now() });
  }

  @OnEvent('agent:turn:end')
  onTurnEnd(event: TurnEndEvent): void {
    const outcome = String(event.outcome);
    this.turns.inc({ outcome });
    const turn = this.running.get(event.turnId);
    this.running.delete(event.turnId);
    if (turn) this.turnSeconds.observe({ outcome }, (performance.now() - turn.startedAt) / 1000);
  }

  @OnEvent('agent:queue')
  onQueue(event: QueueEvent): void {
    const count = Array.isArray(event.waiting) ? event.waiting.length : 0;
    if (count > 0) this.waitingBySession.set(event.sessionId, count);
    else this.waitingBySession.delete(event.sessionId);
  }

  @OnEvent('token:usage')
  onUsage(event: TokenUsageEvent): void {
    // Snapshots (no turnId) describe no model call.
    if (event.turnId && Number.isFinite(event.used) && event.used > 0) {
      this.tokens.inc({ kind: 'prompt' }, event.used);
    }
  }

  @OnEvent('outbound:message')
  onOutbound(event: OutgoingMessage): void {
    this.replies.inc({ source: String(event.source) });
  }

  /** Times one model call (the whole answer, streamed or not) and counts its completion. */
  private async timeModelCall(
    info: ModelCallInfo,
    run: () => Promise<ChatResponse>,
  ): Promise<ChatResponse> {
    const startedAt = performance.now();
    const observe = (status: 'ok' | 'error' | 'aborted') =>
      this.modelCallSeconds.observe(
        { provider: info.provider, status },
        (performance.now() - startedAt) / 1000,
      );
    try {
      const response = await run();
      observe('ok');
      const completion = response?.usage?.completionTokens;
      if (typeof completion === 'number' && Number.isFinite(completion) && completion > 0) {
        this.tokens.inc({ kind: 'completion' }, completion);
      }
      return response;
    } catch (error) {
      observe(info.signal.aborted ? 'aborted' : 'error');
      throw error;
    }
  }
}
