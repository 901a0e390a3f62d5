import type { Context, Tracer } from '@opentelemetry/api';
import type { SlowHookCall } from '../../hooks';
import { SPAN } from './span-attributes';

/**
 * A slow middleware call as a span of its own, made after the fact (it started and ended when the
 * call did): `agent.hook {hook}` with the hook, its owner and its own time.
 */
export function recordSlowHook(tracer: Tracer, call: SlowHookCall, parent: Context): void {
  const attributes = {
    'agent.hook.name': call.hook,
    'agent.hook.self_ms': Math.round(call.selfMs * 1000) / 1000,
    ...(call.owner ? { 'agent.hook.owner': call.owner } : {}),
  };
  tracer
    .startSpan(SPAN.hook(call.hook), { attributes, startTime: call.startTime }, parent)
    .end(call.startTime + call.durationMs);
}
