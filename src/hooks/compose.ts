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
  // Plain functions returning the middlewares' own promises, not an async wrapper per layer:
  // a no-op middleware then costs one promise, not four. A synchronous throw anywhere becomes a
  // rejection, as it would in an async function.
  return (ctx: C) => {
    let reached = false;
    const dispatch = (index: number): Promise<void> => {
      try {
        if (index === middlewares.length) {
          reached = true;
          return defaultAction ? Promise.resolve(defaultAction(ctx)) : RESOLVED;
        }
        let called = false;
        return Promise.resolve(
          middlewares[index](ctx, () => {
            if (called) return Promise.reject(new NextCalledTwiceError(hook));
            called = true;
            return dispatch(index + 1);
          }),
        );
      } catch (error) {
        // Whatever was thrown, unchanged, as an async function would reject with it.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        return Promise.reject(error);
      }
    };
    return dispatch(0).then(() => reached);
  };
}

const RESOLVED: Promise<void> = Promise.resolve();
