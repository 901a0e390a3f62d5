import { NextCalledTwiceError, type HookMiddleware } from '../../../src/contracts';
import { compose } from '../../../src/hooks/compose';
import { HookRegistry } from '../../../src/hooks/hook.registry';

/** A middleware that records `<label>:before` and `<label>:after` around `next`. */
function tracer(log: string[], label: string): HookMiddleware {
  return async (_ctx, next) => {
    log.push(`${label}:before`);
    await next();
    log.push(`${label}:after`);
  };
}

describe('HookRegistry', () => {
  let sut: HookRegistry;

  beforeEach(() => {
    sut = new HookRegistry();
  });

  it('runs middlewares as an onion around the default action', async () => {
    const log: string[] = [];
    sut.use('test:hook', tracer(log, 'outer'));
    sut.use('test:hook', tracer(log, 'inner'));

    const reached = await sut.run('test:hook', {}, () => {
      log.push('default');
    });

    expect(reached).toBe(true);
    expect(log).toEqual(['outer:before', 'inner:before', 'default', 'inner:after', 'outer:after']);
  });

  it('orders by priority (lower first), ties in registration order', async () => {
    const log: string[] = [];
    sut.use('test:hook', tracer(log, 'p0-first'));
    sut.use('test:hook', tracer(log, 'p5'), { priority: 5 });
    sut.use('test:hook', tracer(log, 'p-1'), { priority: -1 });
    sut.use('test:hook', tracer(log, 'p0-second'));

    await sut.run('test:hook', {});

    expect(log.filter((entry) => entry.endsWith(':before'))).toEqual([
      'p-1:before',
      'p0-first:before',
      'p0-second:before',
      'p5:before',
    ]);
  });

  it('passes the same context to every link and to the default action', async () => {
    const ctx = { value: 1 };
    sut.use('test:hook', async (c: typeof ctx, next) => {
      c.value += 1;
      await next();
    });
    let seen: unknown;

    await sut.run('test:hook', ctx, (c) => {
      seen = c;
    });

    expect(seen).toBe(ctx);
    expect(ctx.value).toBe(2);
  });

  it('a middleware that does not call next stops the chain and the default action; run resolves false', async () => {
    const log: string[] = [];
    sut.use('test:hook', tracer(log, 'outer'));
    sut.use('test:hook', () => {
      log.push('stopper');
    });
    sut.use('test:hook', tracer(log, 'never'));
    const defaultAction = jest.fn();

    const reached = await sut.run('test:hook', {}, defaultAction);

    expect(reached).toBe(false);
    expect(defaultAction).not.toHaveBeenCalled();
    expect(log).toEqual(['outer:before', 'stopper', 'outer:after']);
  });

  it('runs the default action when no middleware is registered', async () => {
    const defaultAction = jest.fn();

    const reached = await sut.run('test:hook', { a: 1 }, defaultAction);

    expect(reached).toBe(true);
    expect(defaultAction).toHaveBeenCalledWith({ a: 1 });
  });

  it('resolves true without a default action when every middleware calls next', async () => {
    sut.use('test:hook', (_ctx, next) => next());

    await expect(sut.run('test:hook', {})).resolves.toBe(true);
  });

  it('propagates an error thrown by a middleware to the caller', async () => {
    const defaultAction = jest.fn();
    sut.use('test:hook', () => {
      throw new Error('middleware broke');
    });

    await expect(sut.run('test:hook', {}, defaultAction)).rejects.toThrow('middleware broke');
    expect(defaultAction).not.toHaveBeenCalled();
  });

  it('propagates an error of the default action through the middlewares to the caller', async () => {
    const log: string[] = [];
    sut.use('test:hook', async (_ctx, next) => {
      try {
        await next();
      } catch (error) {
        log.push(`saw ${(error as Error).message}`);
        throw error;
      }
    });

    await expect(
      sut.run('test:hook', {}, async () => {
        throw new Error('default broke');
      }),
    ).rejects.toThrow('default broke');
    expect(log).toEqual(['saw default broke']);
  });

  it('rejects (never throws synchronously) when the default action throws and no middleware is registered', async () => {
    let result: Promise<boolean> | undefined;
    expect(() => {
      result = sut.run('test:hook', {}, () => {
        throw new Error('sync default broke');
      });
    }).not.toThrow();

    await expect(result).rejects.toThrow('sync default broke');
  });

  it('rejects with NextCalledTwiceError when a middleware calls next twice', async () => {
    const defaultAction = jest.fn();
    sut.use('test:hook', async (_ctx, next) => {
      await next();
      await next();
    });

    const run = sut.run('test:hook', {}, defaultAction);

    await expect(run).rejects.toBeInstanceOf(NextCalledTwiceError);
    await expect(run).rejects.toThrow('"test:hook"');
    expect(defaultAction).toHaveBeenCalledTimes(1);
  });

  it('the dispose function removes the middleware', async () => {
    const fn = jest.fn((_ctx: unknown, next: () => Promise<void>) => next());
    const dispose = sut.use('test:hook', fn);
    expect(sut.count('test:hook')).toBe(1);

    dispose();
    await sut.run('test:hook', {});

    expect(fn).not.toHaveBeenCalled();
    expect(sut.count('test:hook')).toBe(0);
  });

  it('disposing twice removes only that registration', () => {
    const dispose = sut.use('test:hook', (_ctx, next) => next());
    sut.use('test:hook', (_ctx, next) => next());

    dispose();
    dispose();

    expect(sut.count('test:hook')).toBe(1);
  });

  it('removeOwner withdraws every registration of that owner, on every hook', async () => {
    const mine = jest.fn((_ctx: unknown, next: () => Promise<void>) => next());
    const theirs = jest.fn((_ctx: unknown, next: () => Promise<void>) => next());
    sut.use('test:a', mine, { owner: 'ModA' });
    sut.use('test:b', mine, { owner: 'ModA' });
    sut.use('test:a', theirs, { owner: 'ModB' });

    const removed = sut.removeOwner('ModA');
    await sut.run('test:a', {});
    await sut.run('test:b', {});

    expect(removed).toBe(2);
    expect(mine).not.toHaveBeenCalled();
    expect(theirs).toHaveBeenCalledTimes(1);
    expect(sut.count()).toBe(1);
  });

  it('a registration made during a run does not join that run', async () => {
    const late = jest.fn((_ctx: unknown, next: () => Promise<void>) => next());
    sut.use('test:hook', async (_ctx, next) => {
      sut.use('test:hook', late, { priority: 10 });
      await next();
    });

    await sut.run('test:hook', {});
    expect(late).not.toHaveBeenCalled();

    await sut.run('test:hook', {});
    expect(late).toHaveBeenCalledTimes(1);
  });

  it('a middleware disposed during a run still completes that run', async () => {
    const log: string[] = [];
    let disposeInner = (): void => undefined;
    sut.use('test:hook', async (_ctx, next) => {
      disposeInner();
      await next();
    });
    disposeInner = sut.use('test:hook', tracer(log, 'inner'), { priority: 1 });

    await sut.run('test:hook', {});
    await sut.run('test:hook', {});

    expect(log).toEqual(['inner:before', 'inner:after']);
  });

  it('count() counts per hook and in total', () => {
    sut.use('test:a', (_ctx, next) => next());
    sut.use('test:a', (_ctx, next) => next());
    sut.use('test:b', (_ctx, next) => next());

    expect(sut.count('test:a')).toBe(2);
    expect(sut.count('test:missing')).toBe(0);
    expect(sut.count()).toBe(3);
  });
});

describe('compose', () => {
  it('nests before/after halves around the default action', async () => {
    const log: string[] = [];
    const run = compose('test:compose', [tracer(log, 'a'), tracer(log, 'b')], () => {
      log.push('core');
    });

    await expect(run({})).resolves.toBe(true);
    expect(log).toEqual(['a:before', 'b:before', 'core', 'b:after', 'a:after']);
  });

  it('resolves false and skips the default action when next is not called', async () => {
    const core = jest.fn();
    const run = compose('test:compose', [async () => undefined], core);

    await expect(run({})).resolves.toBe(false);
    expect(core).not.toHaveBeenCalled();
  });

  it('runs only the default action for an empty chain', async () => {
    const core = jest.fn();

    await expect(compose('test:compose', [], core)({ x: 1 })).resolves.toBe(true);
    expect(core).toHaveBeenCalledWith({ x: 1 });
  });

  it('turns a synchronous throw of a middleware into a rejection', async () => {
    const run = compose('test:compose', [
      () => {
        throw new Error('sync');
      },
    ]);

    await expect(run({})).rejects.toThrow('sync');
  });

  it('rejects with NextCalledTwiceError naming the hook when next runs twice', async () => {
    const core = jest.fn();
    const run = compose(
      'test:compose',
      [
        async (_ctx, next) => {
          await next();
          await next();
        },
      ],
      core,
    );

    await expect(run({})).rejects.toThrow(new NextCalledTwiceError('test:compose'));
    expect(core).toHaveBeenCalledTimes(1);
  });

  it('a composed chain can be run again with a fresh state', async () => {
    const core = jest.fn();
    const run = compose('test:compose', [(_ctx, next) => next()], core);

    await run({});
    await run({});

    expect(core).toHaveBeenCalledTimes(2);
  });

  it('what a middleware or a synchronous default action throws reaches the caller unchanged, as a rejection', async () => {
    const thrown = { reason: 'not an Error' };
    const viaMiddleware = compose('test:compose', [
      () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- a thrown non-Error is the case
        throw thrown;
      },
    ]);
    const viaCore = compose('test:compose', [(_ctx, next) => next()], () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- a thrown non-Error is the case
      throw thrown;
    });
    const registry = new HookRegistry();

    await expect(viaMiddleware({})).rejects.toBe(thrown);
    await expect(viaCore({})).rejects.toBe(thrown);
    let sync: Promise<boolean> | undefined;
    expect(() => {
      sync = registry.run('test:empty', {}, () => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- a thrown non-Error is the case
        throw thrown;
      });
    }).not.toThrow();
    await expect(sync).rejects.toBe(thrown);
  });

  it('a middleware that is a plain function returning nothing still runs the rest of the chain', async () => {
    const core = jest.fn();
    const order: string[] = [];
    const run = compose(
      'test:compose',
      [
        (_ctx, next) => {
          order.push('plain');
          void next();
        },
      ],
      core,
    );

    await expect(run({})).resolves.toBe(true);
    expect(order).toEqual(['plain']);
    expect(core).toHaveBeenCalledTimes(1);
  });
});
