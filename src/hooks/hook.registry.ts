import { Injectable } from '@nestjs/common';
import type { HookContextMap, HookMiddleware, HookName } from '../contracts';
import { compose } from './compose';
import { timedMiddleware, type HookObserver } from './hook-timing';

/** Options of a hook registration. */
export interface HookUseOptions {
  /** Who registered it; `removeOwner(owner)` withdraws all of an owner's registrations. */
  owner?: string;
  /** Lower runs first (further out in the onion); ties run in registration order. @default 0 */
  priority?: number;
}

interface Registration {
  fn: HookMiddleware;
  owner?: string;
  priority: number;
  seq: number;
}

const REACHED: Promise<boolean> = Promise.resolve(true);

/** The hook key type: the typed names plus any string for hooks declared elsewhere. */
type AnyHookName = HookName | (string & {});
type ContextOf<K> = K extends HookName ? HookContextMap[K] : any;

/**
 * Onion middleware chains by hook name (contract H). `run` awaits every link; a throw propagates
 * to the caller (a turn ends with outcome `error`). Events are a different API: see `AgentEvents`.
 */
@Injectable()
export class HookRegistry {
  private readonly chains = new Map<string, Registration[]>();
  private readonly fns = new WeakMap<Registration[], HookMiddleware[]>();
  private timed = new WeakMap<Registration[], HookMiddleware[]>();
  private observer?: HookObserver;
  private seq = 0;

  /**
   * Sets (or with `undefined` removes) the observer told of slow middleware calls; tracing
   * installs one. Until its `active()` says yes, hook runs are not timed.
   */
  observe(observer: HookObserver | undefined): void {
    this.observer = observer;
    this.timed = new WeakMap();
  }

  /** Adds a middleware; returns a function that removes it again. */
  use<K extends AnyHookName>(
    name: K,
    fn: HookMiddleware<ContextOf<K>>,
    options: HookUseOptions = {},
  ): () => void {
    const registration: Registration = {
      fn,
      owner: options.owner,
      priority: options.priority ?? 0,
      seq: this.seq++,
    };
    const chain = [...(this.chains.get(name) ?? []), registration].sort(
      (a, b) => a.priority - b.priority || a.seq - b.seq,
    );
    this.chains.set(name, chain);
    return () => this.remove(name, registration);
  }

  /**
   * Runs the chain of `name` around `defaultAction`. Resolves `true` when the default action was
   * reached, `false` when a middleware did not call `next`. The chain is the one registered when
   * the run starts.
   */
  run<K extends AnyHookName>(
    name: K,
    ctx: ContextOf<K>,
    defaultAction?: (ctx: ContextOf<K>) => Promise<void> | void,
  ): Promise<boolean> {
    const chain = this.chains.get(name);
    if (chain?.length) {
      const fns = this.observer?.active() ? this.timedOf(name, chain) : this.fnsOf(chain);
      return compose(name, fns, defaultAction)(ctx);
    }
    if (!defaultAction) return REACHED;
    try {
      return Promise.resolve(defaultAction(ctx)).then(() => true);
    } catch (error) {
      // A synchronous throw is a rejection too, with what was thrown, as from an async function.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      return Promise.reject(error);
    }
  }

  /** The middlewares of a chain, listed once per chain (a chain is replaced, never changed). */
  private fnsOf(chain: Registration[]): HookMiddleware[] {
    let fns = this.fns.get(chain);
    if (!fns) this.fns.set(chain, (fns = chain.map((r) => r.fn)));
    return fns;
  }

  /** The middlewares of a chain, each timed for the observer. */
  private timedOf(name: string, chain: Registration[]): HookMiddleware[] {
    let fns = this.timed.get(chain);
    if (!fns) {
      const observer = this.observer!;
      fns = chain.map((r) => timedMiddleware(name, r.owner, r.fn, observer));
      this.timed.set(chain, fns);
    }
    return fns;
  }

  /** Removes every registration of an owner; returns how many. */
  removeOwner(owner: string): number {
    let removed = 0;
    for (const [name, chain] of this.chains) {
      const kept = chain.filter((r) => r.owner !== owner);
      removed += chain.length - kept.length;
      this.setChain(name, kept);
    }
    return removed;
  }

  /** Number of middlewares on a hook, or on all hooks. */
  count(name?: AnyHookName): number {
    if (name !== undefined) return this.chains.get(name)?.length ?? 0;
    let total = 0;
    for (const chain of this.chains.values()) total += chain.length;
    return total;
  }

  private remove(name: string, registration: Registration): void {
    const chain = this.chains.get(name);
    if (!chain) return;
    const kept = chain.filter((r) => r !== registration);
    this.setChain(name, kept);
  }

  private setChain(name: string, chain: Registration[]): void {
    if (chain.length) this.chains.set(name, chain);
    else this.chains.delete(name);
  }
}
