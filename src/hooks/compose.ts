import { NextCalledTwiceError, type HookMiddleware } from '../contracts';

/**
 * Onion composition: each middleware gets `(ctx, next)`; `next` runs the rest of the chain and,
 * at its core, the default action. Resolves `true` when the default action was reached, `false`
 * when some middleware did not call `next`. Errors propagate to the caller.
 */
export function compose<C>(
  hook: string,
  middlewares: readonly HookMiddleware<C>[],
  defaultAction?: (ctx: C) => Promise<void> | void,
): (ctx: C) => Promise<boolean> {
  return async (ctx: C) => {
    let reached = false;
    const dispatch = async (index: number): Promise<void> => {
      if (index === middlewares.length) {
        reached = true;
        if (defaultAction) await defaultAction(ctx);
        return;
      }
      let called = false;
      await middlewares[index](ctx, async () => {
        if (called) throw new NextCalledTwiceError(hook);
        called = true;
        await dispatch(index + 1);
      });
    };
    await dispatch(0);
    return reached;
  };
}
