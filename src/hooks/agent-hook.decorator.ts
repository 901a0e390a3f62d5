import { extendArrayMetadata } from '@nestjs/common/utils/extend-metadata.util';
import type { HookContextMap, HookName, HookNext } from '../contracts';

/** Metadata key of `@AgentHook`. */
export const AGENT_HOOK_METADATA = 'agent:hook_metadata';

/** Options of `@AgentHook`. */
export interface AgentHookOptions {
  /** Lower runs first (further out in the onion); ties in registration order. @default 0 */
  priority?: number;
}

/** What `@AgentHook` records on a method. */
export interface AgentHookMetadata extends AgentHookOptions {
  name: string;
}

type HookMethod<K> = (
  ctx: K extends HookName ? HookContextMap[K] : any,
  next: HookNext,
) => Promise<void> | void;

/**
 * Declares a provider method as an onion middleware `(ctx, next)` on the hook `name`. Discovered
 * at bootstrap, withdrawn when the application closes. Stackable: one method may serve several
 * hooks. The method's signature is checked against `HookContextMap[name]`.
 */
export function AgentHook<K extends HookName | (string & {})>(
  name: K,
  options: AgentHookOptions = {},
): <T extends HookMethod<K>>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => TypedPropertyDescriptor<T> {
  return (_target, _key, descriptor) => {
    const metadata: AgentHookMetadata = { name, ...options };
    extendArrayMetadata(
      AGENT_HOOK_METADATA,
      [metadata],
      descriptor.value as unknown as (...args: unknown[]) => unknown,
    );
    return descriptor;
  };
}
AgentHook.KEY = AGENT_HOOK_METADATA;
