import type { ToolCallContext, ToolSpec } from '../../../../src/contracts';
import { ToolOutput, ToolRegistry } from '../../../../src/agent/tools/tool.registry';

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
  required: ['city'],
  additionalProperties: false,
};

const makeContext = (overrides: Partial<ToolCallContext> = {}): ToolCallContext => ({
  sessionId: 's1',
  turnId: 't1',
  callId: 'c1',
  userId: 'u1',
  platform: 'web',
  acceptsImages: false,
  signal: new AbortController().signal,
  ...overrides,
});

const makeTool = (overrides: Partial<ToolSpec> = {}): ToolSpec => ({
  name: 'weather',
  description: 'Weather for a city',
  parameters: weatherSchema,
  handler: jest.fn(() => 'sunny'),
  ...overrides,
});

/** The `error` text of an error result. */
const errorOf = (content: string): string => (JSON.parse(content) as { error: string }).error;

describe('ToolRegistry', () => {
  let sut: ToolRegistry;

  beforeEach(() => {
    sut = new ToolRegistry();
  });

  describe('execute', () => {
    it('runs the handler with the validated arguments and the ToolCallContext', async () => {
      const handler = jest.fn(() => 'sunny');
      sut.register(makeTool({ handler }));
      const context = makeContext();

      const result = await sut.execute('weather', { city: 'Paris', days: 2 }, context);

      expect(result).toEqual({ ok: true, content: 'sunny' });
      expect(handler).toHaveBeenCalledTimes(1);
      expect(handler).toHaveBeenCalledWith({ city: 'Paris', days: 2 }, context);
    });

    it('invalid arguments give an error result naming the problem, and the handler is not called', async () => {
      const handler = jest.fn();
      sut.register(makeTool({ handler }));

      const missing = await sut.execute('weather', { days: 2 }, makeContext());
      const wrongType = await sut.execute('weather', { city: 'Oslo', days: 'two' }, makeContext());

      expect(missing.ok).toBe(false);
      expect(errorOf(missing.content)).toMatch(/Invalid arguments for "weather".*city/);
      expect(wrongType.ok).toBe(false);
      expect(errorOf(wrongType.content)).toMatch(/days.*integer/);
      expect(handler).not.toHaveBeenCalled();
    });

    it('an unknown tool gives an error result naming it', async () => {
      const result = await sut.execute('nope', {}, makeContext());

      expect(result.ok).toBe(false);
      expect(errorOf(result.content)).toContain('Unknown tool "nope"');
    });

    it('a handler that throws gives an error result with its message', async () => {
      sut.register(
        makeTool({
          handler: () => {
            throw new Error('station offline');
          },
        }),
      );

      const result = await sut.execute('weather', { city: 'Rome' }, makeContext());

      expect(result.ok).toBe(false);
      expect(errorOf(result.content)).toContain('station offline');
    });

    it('a handler that rejects gives an error result with its message', async () => {
      sut.register(makeTool({ handler: () => Promise.reject(new Error('async failure')) }));

      const result = await sut.execute('weather', { city: 'Rome' }, makeContext());

      expect(result).toMatchObject({ ok: false });
      expect(errorOf(result.content)).toContain('async failure');
    });

    it('an object returned by the handler is sent as JSON; undefined as an empty string', async () => {
      sut.register(makeTool({ handler: async () => ({ temp: 21, sky: ['clear'] }) }));
      sut.register(makeTool({ name: 'silent', handler: () => undefined }));

      const json = await sut.execute('weather', { city: 'Rome' }, makeContext());
      const empty = await sut.execute('silent', { city: 'Rome' }, makeContext());

      expect(json).toEqual({ ok: true, content: '{"temp":21,"sky":["clear"]}' });
      expect(empty).toEqual({ ok: true, content: '' });
    });

    describe('with fake timers', () => {
      beforeEach(() => {
        jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
      });
      afterEach(() => {
        jest.useRealTimers();
      });

      it('a handler that outlives timeoutMs gives a timeout result and leaves no timer', async () => {
        sut.register(makeTool({ timeoutMs: 20, handler: () => new Promise(() => undefined) }));

        const pending = sut.execute('weather', { city: 'Rome' }, makeContext());
        await jest.advanceTimersByTimeAsync(20);
        const result = await pending;

        expect(result.ok).toBe(false);
        expect(errorOf(result.content)).toContain('timed out after 20 ms');
        expect(jest.getTimerCount()).toBe(0);
      });

      it('a handler that finishes in time clears its timer', async () => {
        sut.register(makeTool({ timeoutMs: 60_000 }));

        await sut.execute('weather', { city: 'Rome' }, makeContext());

        expect(jest.getTimerCount()).toBe(0);
      });
    });

    it('S3: an abort during the call gives a stopped result, and the handler sees signal.aborted', async () => {
      const controller = new AbortController();
      let seenSignal: AbortSignal | undefined;
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      sut.register(
        makeTool({
          handler: (_args, context: ToolCallContext) => {
            seenSignal = context.signal;
            started();
            return new Promise(() => undefined);
          },
        }),
      );

      const pending = sut.execute(
        'weather',
        { city: 'Rome' },
        makeContext({ signal: controller.signal }),
      );
      await running;
      controller.abort();
      const result = await pending;

      expect(result.ok).toBe(false);
      expect(errorOf(result.content)).toContain('was stopped');
      expect(seenSignal?.aborted).toBe(true);
    });

    it('S3: a call whose turn is already stopped does not run the handler', async () => {
      const handler = jest.fn();
      sut.register(makeTool({ handler }));
      const controller = new AbortController();
      controller.abort();

      const result = await sut.execute(
        'weather',
        { city: 'Rome' },
        makeContext({ signal: controller.signal }),
      );

      expect(result.ok).toBe(false);
      expect(handler).not.toHaveBeenCalled();
    });

    it('leaves no abort listener behind: a handler that answers at once adds none, one that answers later removes its own', async () => {
      const controller = new AbortController();
      const add = jest.spyOn(controller.signal, 'addEventListener');
      const remove = jest.spyOn(controller.signal, 'removeEventListener');
      sut.register(makeTool({ handler: () => 'sunny' }));
      sut.register(makeTool({ name: 'later', handler: () => Promise.resolve('rainy') }));
      const context = makeContext({ signal: controller.signal });

      await expect(sut.execute('weather', { city: 'Rome' }, context)).resolves.toMatchObject({
        ok: true,
        content: 'sunny',
      });
      expect(add).not.toHaveBeenCalled();

      await expect(sut.execute('later', { city: 'Rome' }, context)).resolves.toMatchObject({
        ok: true,
        content: 'rainy',
      });
      expect(add).toHaveBeenCalledTimes(1);
      expect(remove).toHaveBeenCalledWith('abort', add.mock.calls[0][1]);
    });

    it('S3: a handler that answers at once but stopped the turn while it ran gives the stopped result', async () => {
      const controller = new AbortController();
      sut.register(
        makeTool({
          handler: () => {
            controller.abort();
            return 'sunny';
          },
        }),
      );

      const result = await sut.execute(
        'weather',
        { city: 'Rome' },
        makeContext({ signal: controller.signal }),
      );

      expect(result.ok).toBe(false);
      expect(errorOf(result.content)).toContain('was stopped');
    });

    it('a handler that throws at once, or answers with a value that is not JSON, fails with its reason', async () => {
      sut.register(
        makeTool({
          handler: () => {
            throw new Error('no sky');
          },
        }),
      );
      sut.register(makeTool({ name: 'big', handler: () => ({ n: BigInt(1) }) }));

      const thrown = await sut.execute('weather', { city: 'Rome' }, makeContext());
      const unserialisable = await sut.execute('big', { city: 'Rome' }, makeContext());

      expect(thrown.ok).toBe(false);
      expect(errorOf(thrown.content)).toContain('failed: no sky');
      expect(unserialisable.ok).toBe(false);
      expect(errorOf(unserialisable.content)).toContain('Tool "big" failed');
    });
  });

  describe('register', () => {
    it('a duplicate name throws, naming the tool', () => {
      sut.register(makeTool());

      expect(() => sut.register(makeTool())).toThrow('"weather"');
    });

    it.each(['', 'has space', 'dots.not.allowed', 'x'.repeat(65), 'ünïcode'])(
      'a bad name (%p) throws',
      (name) => {
        expect(() => sut.register(makeTool({ name }))).toThrow(/must match/);
        expect(sut.definitions()).toHaveLength(0);
      },
    );

    it('an invalid JSON schema throws, naming the tool', () => {
      expect(() =>
        sut.register(
          makeTool({ parameters: { type: 'object', properties: { a: { type: 'nope' } } } }),
        ),
      ).toThrow(/"weather" has invalid parameters/);
      expect(sut.has('weather')).toBe(false);
    });

    it('definitions() lists the tools in registration order, without handlers', () => {
      sut.register(makeTool({ name: 'b_tool', description: 'B' }));
      sut.register(makeTool({ name: 'a_tool', description: 'A', parameters: { type: 'object' } }));

      expect(sut.definitions()).toEqual([
        { name: 'b_tool', description: 'B', parameters: weatherSchema },
        { name: 'a_tool', description: 'A', parameters: { type: 'object' } },
      ]);
    });

    it('the dispose function removes the tool and frees its name', async () => {
      const dispose = sut.register(makeTool());

      dispose();

      expect(sut.has('weather')).toBe(false);
      expect((await sut.execute('weather', { city: 'Rome' }, makeContext())).ok).toBe(false);
      expect(() => sut.register(makeTool())).not.toThrow();
    });

    it('a tool whose schema has an $id can be registered again after dispose or removeOwner', () => {
      const schema = () => ({ $id: 'weather-args', ...weatherSchema });
      const dispose = sut.register(makeTool({ parameters: schema() }), 'ModA');
      dispose();

      expect(() => sut.register(makeTool({ parameters: schema() }), 'ModA')).not.toThrow();
      sut.removeOwner('ModA');
      expect(() => sut.register(makeTool({ parameters: schema() }), 'ModA')).not.toThrow();
    });

    it('a schema that failed to compile does not keep its $id taken', () => {
      const broken = { $id: 'shared-args', type: 'object', properties: { a: { type: 'nope' } } };
      expect(() => sut.register(makeTool({ parameters: broken }))).toThrow(/invalid parameters/);

      expect(() =>
        sut.register(makeTool({ parameters: { $id: 'shared-args', type: 'object' } })),
      ).not.toThrow();
    });

    it('a stale dispose does not remove a newer tool of the same name', () => {
      const dispose = sut.register(makeTool());
      dispose();
      sut.register(makeTool());

      dispose();

      expect(sut.has('weather')).toBe(true);
    });

    it('removeOwner removes exactly that owner’s tools', () => {
      sut.register(makeTool({ name: 'a' }), 'ModA');
      sut.register(makeTool({ name: 'b' }), 'ModA');
      sut.register(makeTool({ name: 'c' }), 'ModB');

      expect(sut.removeOwner('ModA')).toBe(2);
      expect(sut.definitions().map((d) => d.name)).toEqual(['c']);
    });
  });
  describe('needsApproval (issue 20)', () => {
    it('false by default, true for `true`, and a function decides per call', async () => {
      sut.register(makeTool());
      sut.register(makeTool({ name: 'always', needsApproval: true }));
      sut.register(
        makeTool({ name: 'far', needsApproval: (args: { days?: number }) => (args.days ?? 0) > 3 }),
      );

      expect(await sut.needsApproval('weather', { city: 'Oslo' }, makeContext())).toBe(false);
      expect(await sut.needsApproval('always', { city: 'Oslo' }, makeContext())).toBe(true);
      expect(await sut.needsApproval('far', { city: 'Oslo', days: 2 }, makeContext())).toBe(false);
      expect(await sut.needsApproval('far', { city: 'Oslo', days: 7 }, makeContext())).toBe(true);
    });

    it('mayNeedApproval: only a tool with a rule may need approval; no rule, no wait at all', () => {
      sut.register(makeTool());
      sut.register(makeTool({ name: 'always', needsApproval: true }));
      sut.register(makeTool({ name: 'never', needsApproval: false }));
      sut.register(makeTool({ name: 'far', needsApproval: () => false }));

      expect(sut.mayNeedApproval('weather')).toBe(false);
      expect(sut.mayNeedApproval('never')).toBe(false);
      expect(sut.mayNeedApproval('nope')).toBe(false);
      expect(sut.mayNeedApproval('always')).toBe(true);
      expect(sut.mayNeedApproval('far')).toBe(true);
    });

    it('false for an unknown tool and for arguments the schema refuses (the call fails anyway)', async () => {
      sut.register(makeTool({ needsApproval: true }));

      expect(await sut.needsApproval('nope', {}, makeContext())).toBe(false);
      expect(await sut.needsApproval('weather', { days: 2 }, makeContext())).toBe(false);
    });

    it('a function that throws asks for approval (fail closed)', async () => {
      sut.register(
        makeTool({
          needsApproval: () => {
            throw new Error('broken rule');
          },
        }),
      );

      expect(await sut.needsApproval('weather', { city: 'Oslo' }, makeContext())).toBe(true);
    });

    it('refuses a needsApproval that is neither a boolean nor a function, naming the tool', () => {
      expect(() => sut.register(makeTool({ needsApproval: 'yes' as unknown as boolean }))).toThrow(
        /Tool "weather": needsApproval must be true, false or a function/,
      );
    });
  });
});

describe('ToolOutput', () => {
  const context = {
    sessionId: 's',
    turnId: 't',
    callId: 'c',
    acceptsImages: true,
    signal: new AbortController().signal,
  };
  const spec = (value: unknown) => ({
    name: 'shot',
    description: 'A screenshot',
    parameters: { type: 'object' },
    handler: () => value,
  });

  it('a handler returning ToolOutput gives its text as content and its images beside', async () => {
    const registry = new ToolRegistry();
    registry.register(spec(new ToolOutput('a screenshot', ['data:image/png;base64,AAAA'])));
    expect(await registry.execute('shot', {}, context)).toEqual({
      ok: true,
      content: 'a screenshot',
      images: ['data:image/png;base64,AAAA'],
    });
  });

  it('without images the result has no images field', async () => {
    const registry = new ToolRegistry();
    registry.register(spec(new ToolOutput('just text')));
    expect(await registry.execute('shot', {}, context)).toEqual({ ok: true, content: 'just text' });
  });
});
