import { Logger } from '@nestjs/common';
import type { ModelMessage, TurnInput } from '../../../src/contracts';
import { PromptAssembler, TURN_INPUT_FLAG } from '../../../src/prompt/prompt.assembler';
import type { PromptContributionSpec, PromptView } from '../../../src/prompt/prompt.types';

type ViewBase = Omit<PromptView, 'messages'>;

const makeView = (overrides: Partial<ViewBase> = {}): ViewBase => ({
  sessionId: 's1',
  platform: 'web',
  inputs: [],
  signal: new AbortController().signal,
  dryRun: false,
  ...overrides,
});

const system = (content: string): ModelMessage => ({ role: 'system', content });
const user = (content: string, turnInput = false): ModelMessage => ({
  role: 'user',
  content,
  ...(turnInput ? { metadata: { [TURN_INPUT_FLAG]: true } } : {}),
});
const assistant = (content: string): ModelMessage => ({ role: 'assistant', content });

const contribution = (
  key: string,
  output: string | string[] | null,
  extra: Partial<PromptContributionSpec> = {},
): PromptContributionSpec => ({
  key,
  bucket: 'systemOther',
  build: () => output,
  ...extra,
});

/** Role and content of each message, for compact order assertions. */
const shape = (messages: readonly ModelMessage[]) => messages.map((m) => `${m.role}:${m.content}`);

describe('PromptAssembler', () => {
  let sut: PromptAssembler;
  let warn: jest.SpyInstance;

  beforeEach(() => {
    sut = new PromptAssembler();
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(() => {
    warn.mockRestore();
  });

  describe('anchors', () => {
    /** history + this turn's input, as the turn runner builds it. */
    const conversation = (): ModelMessage[] => [
      system('base'),
      system('rules'),
      user('old question'),
      assistant('old answer'),
      user('new question', true),
    ];

    it('R1: identity goes right after the first system message', async () => {
      sut.register(contribution('persona', 'I am Ada', { bucket: 'persona' }));

      const out = await sut.materialise(conversation(), makeView());

      expect(shape(out).slice(0, 3)).toEqual(['system:base', 'system:I am Ada', 'system:rules']);
    });

    it('R1: identity goes first when there is no system message', async () => {
      sut.register(contribution('persona', 'I am Ada', { bucket: 'persona' }));

      const out = await sut.materialise([user('hi', true)], makeView());

      expect(shape(out)).toEqual(['system:I am Ada', 'user:hi']);
    });

    it('R1: knowledge and context go at the end of the leading system block, knowledge first', async () => {
      sut.register(contribution('summary', 'summary text', { bucket: 'memorySummary' }));
      sut.register(contribution('skills', 'skill text', { bucket: 'skills' }));

      const out = await sut.materialise(conversation(), makeView());

      expect(shape(out).slice(0, 5)).toEqual([
        'system:base',
        'system:rules',
        'system:skill text',
        'system:summary text',
        'user:old question',
      ]);
    });

    it('R1: knowledge and context are appended when the list holds only system messages', async () => {
      sut.register(contribution('summary', 'summary text', { bucket: 'memorySummary' }));

      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:summary text']);
    });

    it("R1: turn-context goes before the first message flagged as this turn's input", async () => {
      sut.register(contribution('recall', 'recalled', { bucket: 'memoryVector' }));
      const messages = [
        system('base'),
        user('old question'),
        assistant('old answer'),
        user('first input', true),
        user('second input', true),
      ];

      const out = await sut.materialise(messages, makeView());

      expect(shape(out)).toEqual([
        'system:base',
        'user:old question',
        'assistant:old answer',
        'system:recalled',
        'user:first input',
        'user:second input',
      ]);
    });

    it('R1: turn-context falls back to before the last user message when no input is flagged', async () => {
      sut.register(contribution('recall', 'recalled', { bucket: 'memoryVector' }));

      const out = await sut.materialise(
        [system('base'), user('a'), assistant('b'), user('c')],
        makeView(),
      );

      expect(shape(out)).toEqual([
        'system:base',
        'user:a',
        'assistant:b',
        'system:recalled',
        'user:c',
      ]);
    });

    it('R1: turn-hint goes right before the last user message', async () => {
      sut.register(contribution('platform', 'you are on web', { bucket: 'platform' }));
      const messages = [
        system('base'),
        user('first', true),
        user('second', true),
        assistant('calling a tool'),
      ];

      const out = await sut.materialise(messages, makeView());

      expect(shape(out)).toEqual([
        'system:base',
        'user:first',
        'system:you are on web',
        'user:second',
        'assistant:calling a tool',
      ]);
    });

    it('R1: a turn-hint is dropped when there is no user message', async () => {
      sut.register(contribution('platform', 'you are on web', { bucket: 'platform' }));

      const out = await sut.materialise([system('base'), assistant('x')], makeView());

      expect(shape(out)).toEqual(['system:base', 'assistant:x']);
    });

    it('an explicit anchor overrides the bucket default', async () => {
      sut.register(
        contribution('persona-hint', 'late persona', { bucket: 'persona', anchor: 'turn-hint' }),
      );

      const out = await sut.materialise([system('base'), user('q', true)], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:late persona', 'user:q']);
    });

    it('places every anchor in one call', async () => {
      sut.register(contribution('id', 'ID', { bucket: 'persona' }));
      sut.register(contribution('kn', 'KN', { bucket: 'skills' }));
      sut.register(contribution('ctx', 'CTX', { bucket: 'memorySummary' }));
      sut.register(contribution('tc', 'TC', { bucket: 'memoryVector' }));
      sut.register(contribution('th', 'TH', { bucket: 'platform' }));

      const out = await sut.materialise(conversation(), makeView());

      expect(shape(out)).toEqual([
        'system:base',
        'system:ID',
        'system:rules',
        'system:KN',
        'system:CTX',
        'user:old question',
        'assistant:old answer',
        'system:TC',
        'system:TH',
        'user:new question',
      ]);
    });
  });

  describe('order and keys', () => {
    it('R3: orders blocks of one anchor by priority, then by global key', async () => {
      sut.register(contribution('b', 'B (p0, ModA)'), 'ModA');
      sut.register(contribution('a', 'A (p0, ModB)'), 'ModB');
      sut.register(contribution('z', 'Z (p-1, ModZ)', { priority: -1 }), 'ModZ');
      sut.register(contribution('a', 'A (p0, ModA)'), 'ModA');

      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual([
        'system:base',
        'system:Z (p-1, ModZ)',
        'system:A (p0, ModA)',
        'system:B (p0, ModA)',
        'system:A (p0, ModB)',
      ]);
      expect(sut.list().map((c) => c.globalKey)).toEqual(['ModZ/z', 'ModA/a', 'ModA/b', 'ModB/a']);
    });

    it("R3: the global key is '<owner>/<key>' and get() finds it", () => {
      sut.register(contribution('profile', 'x'), 'UserModule');
      sut.register(contribution('loose', 'y'));

      expect(sut.get('UserModule/profile')).toMatchObject({
        key: 'profile',
        owner: 'UserModule',
        globalKey: 'UserModule/profile',
      });
      expect(sut.get('runtime/loose')?.owner).toBe('runtime');
      expect(sut.get('profile')).toBeUndefined();
    });

    it('R3: every block carries metadata.injector (the global key) and metadata.bucket', async () => {
      sut.register(contribution('skills', 'skill text', { bucket: 'skills' }), 'SkillModule');

      const out = await sut.materialise([system('base')], makeView());

      expect(out[1]).toEqual({
        role: 'system',
        content: 'skill text',
        metadata: { injector: 'SkillModule/skills', bucket: 'skills' },
      });
    });

    it('R3: a global key registered twice throws, naming it', () => {
      sut.register(contribution('dup', 'x'), 'ModA');

      expect(() => sut.register(contribution('dup', 'y'), 'ModA')).toThrow('ModA/dup');
      expect(() => sut.register(contribution('dup', 'y'), 'ModB')).not.toThrow();
    });

    it("R3: a key containing '/' or an empty key throws", () => {
      expect(() => sut.register(contribution('a/b', 'x'))).toThrow('"a/b"');
      expect(() => sut.register(contribution('', 'x'))).toThrow();
      expect(sut.list()).toHaveLength(0);
    });

    it('removeOwner withdraws exactly that owner’s contributions', async () => {
      sut.register(contribution('a', 'A'), 'ModA');
      sut.register(contribution('b', 'B'), 'ModA');
      sut.register(contribution('c', 'C'), 'ModB');

      expect(sut.removeOwner('ModA')).toBe(2);
      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:C']);
      expect(sut.get('ModA/a')).toBeUndefined();
    });

    it('the dispose function withdraws the contribution and frees its key', async () => {
      const dispose = sut.register(contribution('a', 'A'), 'ModA');

      dispose();

      expect(await sut.materialise([system('base')], makeView())).toHaveLength(1);
      expect(() => sut.register(contribution('a', 'again'), 'ModA')).not.toThrow();
    });

    it('a stale dispose does not withdraw a newer registration under the same key', () => {
      const dispose = sut.register(contribution('a', 'A'), 'ModA');
      dispose();
      sut.register(contribution('a', 'newer'), 'ModA');

      dispose();

      expect(sut.get('ModA/a')).toBeDefined();
    });
  });

  describe('building', () => {
    it('R1: a contribution already present is not rebuilt (built once per turn)', async () => {
      const build = jest.fn(() => 'summary');
      sut.register({ key: 'sum', bucket: 'memorySummary', build }, 'Mem');

      const first = await sut.materialise([system('base'), user('q', true)], makeView());
      const second = await sut.materialise([...first, assistant('tool call')], makeView());

      expect(build).toHaveBeenCalledTimes(1);
      expect(second.filter((m) => m.metadata?.injector === 'Mem/sum')).toHaveLength(1);
    });

    it('returns a new list and leaves the input list untouched', async () => {
      sut.register(contribution('a', 'A'));
      const input = [system('base')];

      const out = await sut.materialise(input, makeView());

      expect(out).not.toBe(input);
      expect(input).toHaveLength(1);
      expect(out[0]).toBe(input[0]);
    });

    it('a string[] output gives one block per string, in order; empty strings are skipped', async () => {
      sut.register(contribution('many', ['one', '', 'two', 'three']), 'Mod');

      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:one', 'system:two', 'system:three']);
      expect(out.slice(1).every((m) => m.metadata?.injector === 'Mod/many')).toBe(true);
    });

    it('a null output adds nothing this time and is built again on the next call', async () => {
      const build = jest.fn<string | null, []>().mockReturnValueOnce(null).mockReturnValue('now');
      sut.register({ key: 'later', bucket: 'systemOther', build });

      const first = await sut.materialise([system('base')], makeView());
      const second = await sut.materialise(first, makeView());

      expect(shape(first)).toEqual(['system:base']);
      expect(shape(second)).toEqual(['system:base', 'system:now']);
    });

    it('a throwing build is skipped; the others still land', async () => {
      sut.register({
        key: 'broken',
        bucket: 'systemOther',
        build: () => {
          throw new Error('boom');
        },
      });
      sut.register({
        key: 'rejecting',
        bucket: 'systemOther',
        build: () => Promise.reject(new Error('async boom')),
      });
      sut.register(contribution('fine', 'fine'));

      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:fine']);
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('runtime/broken'));
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('runtime/rejecting'));
    });

    describe('timeouts', () => {
      beforeEach(() => {
        jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
      });
      afterEach(() => {
        jest.useRealTimers();
      });

      it('a build that outlives its timeoutMs is skipped, the others land, and no timer is left', async () => {
        sut.register({
          key: 'slow',
          bucket: 'systemOther',
          timeoutMs: 5,
          build: () => new Promise<string>(() => undefined),
        });
        sut.register(contribution('fast', 'fast'));

        const pending = sut.materialise([system('base')], makeView());
        await jest.advanceTimersByTimeAsync(5);
        const out = await pending;

        expect(shape(out)).toEqual(['system:base', 'system:fast']);
        expect(warn).toHaveBeenCalledWith(expect.stringContaining('runtime/slow'));
        expect(jest.getTimerCount()).toBe(0);
      });

      it('a build that finishes in time clears its timeout timer', async () => {
        sut.register(contribution('quick', 'quick', { timeoutMs: 60_000 }));

        const out = await sut.materialise([system('base')], makeView());

        expect(shape(out)).toEqual(['system:base', 'system:quick']);
        expect(jest.getTimerCount()).toBe(0);
      });

      it('only a build that answers later is raced against a timer; one that answers at once needs none', async () => {
        let answer!: (text: string) => void;
        sut.register(contribution('now', 'now', { timeoutMs: 60_000 }));
        sut.register({
          key: 'later',
          bucket: 'systemOther',
          timeoutMs: 60_000,
          build: () => new Promise<string>((resolve) => (answer = resolve)),
        });

        const pending = sut.materialise([system('base')], makeView());
        expect(jest.getTimerCount()).toBe(1);
        answer('later');
        const out = await pending;

        expect(shape(out)).toEqual(['system:base', 'system:later', 'system:now']);
        expect(jest.getTimerCount()).toBe(0);
      });
    });

    it('builds run in parallel on one view', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const started: string[] = [];
      for (const key of ['a', 'b']) {
        sut.register({
          key,
          bucket: 'systemOther',
          build: async () => {
            started.push(key);
            if (started.length === 2) release();
            await gate;
            return key;
          },
        });
      }

      const out = await sut.materialise([system('base')], makeView());

      expect(shape(out)).toEqual(['system:base', 'system:a', 'system:b']);
    });

    it('R2: the view carries sessionId, platform, inputs, signal, dryRun and a frozen snapshot of the messages', async () => {
      const views: PromptView[] = [];
      sut.register({
        key: 'spy',
        bucket: 'systemOther',
        build: (view) => {
          views.push(view);
          return null;
        },
      });
      const controller = new AbortController();
      const inputs: TurnInput[] = [{ message: { sessionId: 's9', content: 'hello' } }];
      const messages = [system('base'), user('hello', true)];

      await sut.materialise(
        messages,
        makeView({
          sessionId: 's9',
          platform: 'discord',
          inputs,
          signal: controller.signal,
          dryRun: true,
        }),
      );

      expect(views).toHaveLength(1);
      const [view] = views;
      expect(view).toMatchObject({ sessionId: 's9', platform: 'discord', dryRun: true });
      expect(view.inputs).toBe(inputs);
      expect(view.signal).toBe(controller.signal);
      expect(shape(view.messages)).toEqual(['system:base', 'user:hello']);
      expect(view.messages).not.toBe(messages);
      expect(Object.isFrozen(view.messages)).toBe(true);
    });

    it('R2: a build cannot change the prompt through its view', async () => {
      sut.register({
        key: 'vandal',
        bucket: 'systemOther',
        build: (view) => {
          try {
            (view.messages as ModelMessage[]).push(user('injected'));
          } catch {
            // frozen list: expected
          }
          try {
            view.messages[0].content = 'rewritten';
          } catch {
            // frozen message: expected
          }
          return 'block';
        },
      });
      const messages = [system('base'), user('q', true)];

      const out = await sut.materialise(messages, makeView());

      expect(shape(out)).toEqual(['system:base', 'system:block', 'user:q']);
      expect(messages[0].content).toBe('base');
    });
  });
});
