import {
  TurnAbortedError,
  WellKnownMetadataKeys as K,
  type IncomingMessage,
  type ReplyBeforeContext,
} from '../../../../src/contracts';
import { finaliseReply, type FinalAnswer } from '../../../../src/agent/engine/turn-loop';
import { useEngineSpec } from '../../../support/engine-spec';
import {
  answers,
  echoAppend,
  newInputMessage,
  newSystemMessage,
  SESSION_ID,
} from '../../../support/turn-fixtures';

const DEFAULT_FEEDBACK =
  'Your previous answer did not have the required format. Answer again, following the format described in the system prompt.';

/** A reply:before middleware that asks for a retry while `invalid(content)` holds. */
function validator(invalid: (content: string) => boolean, maxRetries = 2, feedback?: string) {
  return async (ctx: ReplyBeforeContext, next: () => Promise<void>) => {
    if (invalid(ctx.content)) {
      ctx.retryRequested = true;
      ctx.maxRetries = maxRetries;
      ctx.retryFeedback = feedback;
    }
    await next();
  };
}

describe('finaliseReply (reply finaliser)', () => {
  const spec = useEngineSpec();

  function setup(options: { lead?: Partial<IncomingMessage>; historyBase?: number } = {}) {
    const { deps, mocks, provider, turn, state } = spec.turnState({
      inputs: [{ content: 'Give me JSON', ...options.lead }],
    });
    state.calls = 1;
    state.historyBase = options.historyBase ?? 0;
    const sent = {
      messages: [newSystemMessage(), newInputMessage('Give me JSON')],
      tools: [],
      untrimmedHistory: 0,
    };
    const seen: ReplyBeforeContext[] = [];
    deps.hooks.use('agent:reply:before', async (ctx, next) => {
      seen.push({ ...ctx });
      await next();
    });
    return {
      sut: (content: string) =>
        finaliseReply(deps, state, { response: { content }, sent } satisfies FinalAnswer),
      deps,
      mocks,
      provider,
      turn,
      state,
      sent,
      seen,
    };
  }

  it('without middleware the answer is the reply, visible and stored alike', async () => {
    const { sut, seen, turn } = setup();

    const reply = await sut('Hello!');

    expect(reply).toEqual({ visible: 'Hello!', stored: 'Hello!', visibleContent: undefined });
    expect(seen).toEqual([
      {
        content: 'Hello!',
        sessionId: SESSION_ID,
        turnId: turn.id,
        platform: 'web',
        inputs: turn.inputs,
        attempt: 0,
        maxRetries: 0,
      },
    ]);
  });

  describe('retry protocol', () => {
    it('a requested retry calls the model again without tools, with the draft and the feedback appended', async () => {
      const { sut, deps, provider, sent, seen } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => !c.startsWith('{'), 2, 'Reply in JSON.'),
      );
      provider.script(answers.text('{"reply":"hi"}'));

      const reply = await sut('hi');

      expect(provider.requests).toHaveLength(1);
      expect(provider.requests[0].tools).toBeUndefined();
      expect(provider.requests[0].messages).toEqual([
        ...sent.messages,
        { role: 'assistant', content: 'hi' },
        { role: 'system', content: 'Reply in JSON.' },
      ]);
      expect(seen.map((c) => [c.attempt, c.content])).toEqual([
        [0, 'hi'],
        [1, '{"reply":"hi"}'],
      ]);
      expect(reply.visible).toBe('{"reply":"hi"}');
    });

    it('without feedback the default feedback is appended', async () => {
      const { sut, deps, provider } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c === 'bad', 1),
      );
      provider.script(answers.text('good'));

      await sut('bad');

      expect(provider.requests[0].messages.at(-1)).toEqual({
        role: 'system',
        content: DEFAULT_FEEDBACK,
      });
    });

    it('each retry starts again from the final call with only the latest draft', async () => {
      const { sut, deps, provider, sent } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c.startsWith('bad'), 3),
      );
      provider.script(answers.text('bad 2'), answers.text('good'));

      await sut('bad 1');

      expect(provider.requests[1].messages).toEqual([
        ...sent.messages,
        { role: 'assistant', content: 'bad 2' },
        { role: 'system', content: DEFAULT_FEEDBACK },
      ]);
    });

    it('the loop is bounded by maxRetries; when retries run out the content is emptied', async () => {
      const { sut, deps, provider, seen } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator(() => true, 2),
      );
      provider.script(answers.text('still bad 1'), answers.text('still bad 2'));

      const reply = await sut('bad');

      expect(provider.requests).toHaveLength(2);
      expect(seen.map((c) => c.attempt)).toEqual([0, 1, 2]);
      expect(reply).toEqual({ visible: '', stored: '', visibleContent: undefined });
    });

    it('when retries run out, an archiveContent set by the middleware is still stored', async () => {
      const { sut, deps, provider } = setup();
      deps.hooks.use('agent:reply:before', async (ctx, next) => {
        ctx.retryRequested = true;
        ctx.maxRetries = 1;
        ctx.archiveContent = `[discarded: ${ctx.content}]`;
        await next();
      });
      provider.script(answers.text('bad again'));

      const reply = await sut('bad');

      expect(reply).toEqual({
        visible: '',
        stored: '[discarded: bad again]',
        visibleContent: undefined,
      });
    });

    it.each([0, -1])(
      'maxRetries %d never calls the model again, but the content is emptied',
      async (max) => {
        const { sut, deps, provider } = setup();
        deps.hooks.use(
          'agent:reply:before',
          validator(() => true, max),
        );

        const reply = await sut('unvalidated');

        expect(provider.requests).toHaveLength(0);
        expect(reply.visible).toBe('');
      },
    );

    it('an empty draft is never retried', async () => {
      const { sut, deps, provider } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator(() => true, 3),
      );

      const reply = await sut('   ');

      expect(provider.requests).toHaveLength(0);
      expect(reply.visible).toBe('');
    });

    it('a retry resets archiveContent, visibleContent, retryRequested and retryFeedback before the hook runs again', async () => {
      const { sut, deps, provider, seen } = setup();
      let attempt = 0;
      deps.hooks.use('agent:reply:before', async (ctx, next) => {
        if (attempt++ === 0) {
          Object.assign(ctx, {
            archiveContent: 'A',
            visibleContent: 'V',
            retryRequested: true,
            retryFeedback: 'F',
            maxRetries: 1,
          });
        }
        await next();
      });
      provider.script(answers.text('second'));

      const reply = await sut('first');

      expect(seen[1]).toMatchObject({
        content: 'second',
        archiveContent: undefined,
        visibleContent: undefined,
        retryRequested: false,
        retryFeedback: undefined,
        attempt: 1,
        maxRetries: 1,
      });
      expect(reply).toEqual({ visible: 'second', stored: 'second', visibleContent: undefined });
    });

    it('U1, I15: each retry call emits its own token:usage; retry scaffolding never counts as history', async () => {
      const { sut, deps, provider, mocks, turn, state } = setup({ historyBase: 7 });
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c.startsWith('bad'), 3),
      );
      provider.script(answers.text('bad 2', { promptTokens: 55 }), answers.text('good'));

      await sut('bad 1');

      expect(mocks.events.of('token:usage')).toEqual([
        expect.objectContaining({ turnId: turn.id, historyMessages: 7, used: 55 }),
        expect.objectContaining({ turnId: turn.id, historyMessages: 7 }),
      ]);
      expect(state.calls).toBe(3);
    });

    it('T1: the chunks of a retry call stream with the turn id', async () => {
      const { sut, deps, provider, mocks, turn } = setup();
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c === 'bad', 1),
      );
      provider.script(answers.text('good'));

      await sut('bad');

      expect(mocks.events.of('outbound:stream')).toEqual([
        { sessionId: SESSION_ID, turnId: turn.id, seq: 1, delta: 'good' },
      ]);
    });

    it('S3: a stop before a retry ends with TurnAbortedError and no model call', async () => {
      const { sut, deps, provider, turn } = setup();
      deps.hooks.use('agent:reply:before', async (ctx, next) => {
        Object.assign(ctx, { retryRequested: true, maxRetries: 2 });
        turn.abort({});
        await next();
      });

      await expect(sut('bad')).rejects.toBeInstanceOf(TurnAbortedError);
      expect(provider.requests).toHaveLength(0);
    });
  });

  describe('drafts (P2, I4)', () => {
    it('P2: in rooms each draft discarded by a retry is persisted with sent: false and the turn id', async () => {
      const { sut, deps, provider, mocks, turn, state } = setup({ lead: { sessionKind: 'room' } });
      mocks.archive.append.mockImplementation(echoAppend);
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c.startsWith('bad'), 3),
      );
      provider.script(answers.text('bad 2'), answers.text('good'));

      await sut('bad 1');

      expect(mocks.archive.append.mock.calls).toEqual([
        [
          [
            {
              sessionId: SESSION_ID,
              role: 'assistant',
              content: 'bad 1',
              metadata: { [K.TurnId]: turn.id, [K.Sent]: false },
            },
          ],
        ],
        [
          [
            expect.objectContaining({
              content: 'bad 2',
              metadata: { [K.TurnId]: turn.id, [K.Sent]: false },
            }),
          ],
        ],
      ]);
      expect(state.persistedAny).toBe(true);
    });

    it('P2, I4: outside rooms drafts are not persisted', async () => {
      const { sut, deps, provider, mocks, state } = setup({ lead: { sessionKind: 'web' } });
      deps.hooks.use(
        'agent:reply:before',
        validator((c) => c === 'bad', 1),
      );
      provider.script(answers.text('good'));

      await sut('bad');

      expect(mocks.archive.append).not.toHaveBeenCalled();
      expect(state.persistedAny).toBe(false);
    });
  });

  describe('stored and visible content', () => {
    it('stored = archiveContent ?? content', async () => {
      const { sut, deps } = setup();
      deps.hooks.use('agent:reply:before', async (ctx, next) => {
        ctx.archiveContent = '{"reply":"hi","mood":"happy"}';
        ctx.content = 'hi';
        await next();
      });

      await expect(sut('{"reply":"hi","mood":"happy"}')).resolves.toEqual({
        visible: 'hi',
        stored: '{"reply":"hi","mood":"happy"}',
        visibleContent: undefined,
      });
    });

    it.each([
      {
        kind: 'different from what is stored',
        patch: { archiveContent: '{"reply":"hi"}', visibleContent: 'hi' },
        expected: 'hi',
      },
      {
        kind: 'equal to what is stored',
        patch: { archiveContent: 'hi', visibleContent: 'hi' },
        expected: undefined,
      },
      {
        kind: 'equal to the content when nothing else is stored',
        patch: { visibleContent: '{"reply":"hi"}' },
        expected: undefined,
      },
      {
        kind: 'that is empty',
        patch: { archiveContent: '{"reply":""}', visibleContent: '' },
        expected: undefined,
      },
    ])('P1: visibleContent $kind is recorded as $expected', async ({ patch, expected }) => {
      const { sut, deps } = setup();
      deps.hooks.use('agent:reply:before', async (ctx, next) => {
        Object.assign(ctx, patch);
        await next();
      });

      const reply = await sut('{"reply":"hi"}');

      expect(reply.visibleContent).toBe(expected);
    });
  });
});
