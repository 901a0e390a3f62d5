import {
  ControlKinds,
  WellKnownMetadataKeys as K,
  type IncomingMessage,
  type NewMessage,
} from '../../../../../src/contracts';
import {
  deliverReply,
  endStream,
  errorNotice,
  persistMarkers,
  turnRecord,
  type Ending,
} from '../../../../../src/agent/engine/phases/bookkeeping';
import type { FinalReply } from '../../../../../src/agent/engine/turn-state';
import { useEngineSpec, type TurnStateOptions } from '../../../../support/engine-spec';
import { echoAppend, SESSION_ID } from '../../../../support/turn-fixtures';

const alice = { platform: 'im', userId: 'alice' };

describe('turn bookkeeping', () => {
  const spec = useEngineSpec();

  function setup(options: TurnStateOptions & { lead?: Partial<IncomingMessage> } = {}) {
    const { deps, mocks, turn, state } = spec.turnState({
      ...options,
      inputs: [options.lead ?? {}],
    });
    mocks.archive.append.mockImplementation(echoAppend);
    const appended = (): NewMessage[][] =>
      mocks.archive.append.mock.calls.map(([messages]) => messages);
    return { deps, mocks, turn, state, appended };
  }

  describe('turnRecord (I7)', () => {
    it('I7: a human turn records its outcome only', () => {
      const { state } = setup();

      expect(turnRecord(state, { outcome: 'silent' })).toEqual({ outcome: 'silent' });
    });

    it('I7: a sourced turn records its source; an error its one-sentence reason', () => {
      const { state } = setup({ lead: { source: 'webhook' } });

      expect(
        turnRecord(state, { outcome: 'error', error: '[error] The turn failed: boom.' }),
      ).toEqual({ outcome: 'error', source: 'webhook', error: '[error] The turn failed: boom.' });
    });

    it('I7: an aborted turn records who stopped it; the reason never goes in', () => {
      const { state, turn } = setup();
      turn.abort({ by: alice, reason: 'user pressed stop' });

      expect(turnRecord(state, { outcome: 'aborted' })).toEqual({ outcome: 'aborted', by: alice });
    });

    it('I7: `by` only goes on aborted records', () => {
      const { state, turn } = setup();
      turn.abort({ by: alice });

      expect(turnRecord(state, { outcome: 'error', error: 'x' })).toEqual({
        outcome: 'error',
        error: 'x',
      });
    });
  });

  describe('deliverReply', () => {
    const reply: FinalReply = {
      visible: 'Hi Alice',
      stored: '{"reply":"Hi Alice"}',
      visibleContent: 'Hi Alice',
    };

    it('P1, P4: persists the reply with turn id, record, model, tokens, platform, selfId, group, kind and visible text', async () => {
      const { deps, mocks, turn, state } = setup({
        agent: { selfId: 'bot-9' },
        lead: { platform: 'im', groupId: 'group-3', sessionKind: 'room', source: 'proactive' },
      });
      Object.assign(state, { promptTokens: 150, completionTokens: 30 });
      state.reasoning.push('first', 'second');
      const encoding = deps.estimator.encodingFor('scripted-model');

      await deliverReply(deps, state, reply);

      expect(mocks.archive.append).toHaveBeenCalledTimes(1);
      expect(mocks.archive.append).toHaveBeenCalledWith([
        {
          sessionId: SESSION_ID,
          role: 'assistant',
          content: '{"reply":"Hi Alice"}',
          reasoningContent: 'first\n---\nsecond',
          metadata: {
            [K.TurnId]: turn.id,
            [K.TurnRecord]: { outcome: 'replied', source: 'proactive' },
            [K.Model]: { provider: 'scripted', model: 'scripted-model' },
            [K.Tokens]: { prompt: 150, completion: 30 },
            [K.Platform]: 'im',
            [K.SelfId]: 'bot-9',
            [K.GroupId]: 'group-3',
            [K.SessionKind]: 'room',
            [K.VisibleContent]: 'Hi Alice',
            [K.TokenCount]: {
              [encoding]: deps.estimator.countMessage(
                {
                  role: 'assistant',
                  content: '{"reply":"Hi Alice"}',
                  reasoningContent: 'first\n---\nsecond',
                },
                encoding,
              ),
            },
          },
        },
      ]);
    });

    it('T1: sends the visible reply once, as outbound:message with the turn id, after persisting it', async () => {
      const { deps, mocks, turn, state } = setup({ lead: { platform: 'im' } });
      state.promptTokens = 10;
      const sentBeforePersisting: number[] = [];
      mocks.archive.append.mockImplementation((messages) => {
        sentBeforePersisting.push(mocks.events.of('outbound:message').length);
        return echoAppend(messages);
      });

      await deliverReply(deps, state, reply);

      expect(sentBeforePersisting).toEqual([0]);
      expect(mocks.events.of('outbound:message')).toEqual([
        {
          sessionId: SESSION_ID,
          turnId: turn.id,
          content: 'Hi Alice',
          source: 'agent',
          platform: 'im',
          model: { provider: 'scripted', model: 'scripted-model' },
          tokens: { prompt: 10, completion: 0 },
        },
      ]);
    });

    it('P1: keys with nothing to record are left out; the session kind falls back to the settings', async () => {
      const { deps, state, appended } = setup({
        lead: { platform: undefined },
        settings: { kind: 'api' },
      });

      await deliverReply(deps, state, { visible: 'ok', stored: 'ok' });

      const [[message]] = appended();
      expect(Object.keys(message.metadata).sort()).toEqual(
        [K.TurnId, K.TurnRecord, K.Model, K.Tokens, K.SessionKind, K.TokenCount].sort(),
      );
      expect(message.metadata[K.SessionKind]).toBe('api');
      expect(message).not.toHaveProperty('reasoningContent');
    });

    it('an archive failure rejects and nothing is sent', async () => {
      const { deps, mocks, state } = setup();
      mocks.archive.append.mockRejectedValue(new Error('read-only database'));

      await expect(deliverReply(deps, state, reply)).rejects.toThrow('read-only database');
      expect(mocks.events.of('outbound:message')).toEqual([]);
    });
  });

  describe('persistMarkers (P4, P5)', () => {
    it.each<Ending>([
      { outcome: 'silent' },
      { outcome: 'error', error: '[error] The turn failed: boom.' },
    ])(
      'P4: a turn ending $outcome persists one event marker carrying the turn id and record',
      async (ending) => {
        const { deps, mocks, turn, state } = setup();
        state.persistedAny = true;

        await persistMarkers(deps, state, ending);

        expect(mocks.archive.append).toHaveBeenCalledTimes(1);
        expect(mocks.archive.append).toHaveBeenCalledWith([
          {
            sessionId: SESSION_ID,
            role: 'system',
            kind: ControlKinds.EventMarker,
            content: '',
            metadata: { [K.TurnId]: turn.id, [K.TurnRecord]: turnRecord(state, ending) },
          },
        ]);
      },
    );

    it('P5: an aborted turn with persisted material writes the stop marker, then the event marker, in one write', async () => {
      const { deps, mocks, turn, state } = setup();
      state.persistedAny = true;
      turn.abort({ by: alice, reason: 'secret reason' });

      await persistMarkers(deps, state, { outcome: 'aborted' });

      expect(mocks.archive.append).toHaveBeenCalledTimes(1);
      const [[stop, marker]] = mocks.archive.append.mock.calls[0];
      expect(stop).toEqual({
        sessionId: SESSION_ID,
        role: 'system',
        kind: ControlKinds.TurnStopped,
        content: expect.stringContaining('stopped by im:alice'),
        metadata: { [K.TurnId]: turn.id, [K.StoppedBy]: alice },
      });
      expect(marker).toMatchObject({
        kind: ControlKinds.EventMarker,
        metadata: { [K.TurnRecord]: { outcome: 'aborted', by: alice } },
      });
      expect(JSON.stringify(mocks.archive.append.mock.calls)).not.toContain('secret reason');
    });

    it('P5: a stop without a person writes a stop marker that names nobody', async () => {
      const { deps, appended, turn, state } = setup();
      state.persistedAny = true;
      turn.abort({});

      await persistMarkers(deps, state, { outcome: 'aborted' });

      const [[stop]] = appended();
      expect(stop.content).toBe(
        '[The previous turn was stopped before it finished; the messages above it were not answered.]',
      );
      expect(stop.metadata).toEqual({ [K.TurnId]: turn.id });
    });

    it('P5: an aborted turn with nothing persisted writes only the event marker', async () => {
      const { deps, appended, turn, state } = setup();
      turn.abort({ by: alice });

      await persistMarkers(deps, state, { outcome: 'aborted' });

      expect(appended()).toEqual([[expect.objectContaining({ kind: ControlKinds.EventMarker })]]);
    });
  });

  describe('endStream (I9)', () => {
    it('I9: sends the stream-end marker with the turn id, once', () => {
      const { deps, mocks, turn, state } = setup();

      endStream(deps, state);
      endStream(deps, state);

      expect(mocks.events.emitted).toEqual([
        {
          name: 'outbound:stream',
          payload: { sessionId: SESSION_ID, turnId: turn.id, seq: 1, done: true },
        },
      ]);
    });
  });

  describe('errorNotice (H4)', () => {
    const ONE_LINE = /^\[error\] The turn failed: [^\n]+\.$/;

    it('H4: one line prefixed [error], ending with one full stop', () => {
      expect(errorNotice(new Error('connect ECONNREFUSED 127.0.0.1:443'))).toBe(
        '[error] The turn failed: connect ECONNREFUSED 127.0.0.1:443.',
      );
      expect(errorNotice(new Error('Bad gateway...  '))).toBe(
        '[error] The turn failed: Bad gateway.',
      );
    });

    it('H4: keeps the first line of a multi-line message and never a stack trace', () => {
      const error = new Error('Tool registry exploded\n    at Object.<anonymous> (x.ts:1:1)');

      const notice = errorNotice(error);

      expect(notice).toBe('[error] The turn failed: Tool registry exploded.');
      expect(notice).toMatch(ONE_LINE);
      expect(notice).not.toContain(error.stack?.split('\n')[1]?.trim() ?? 'at ');
    });

    it('H4: values that are not errors are described too', () => {
      expect(errorNotice('plain string')).toBe('[error] The turn failed: plain string.');
      expect(errorNotice(42)).toBe('[error] The turn failed: 42.');
      expect(errorNotice(new Error(''))).toBe('[error] The turn failed: unknown error.');
    });

    it('H4: a very long message is cut', () => {
      const notice = errorNotice(new Error('x'.repeat(1000)));

      expect(notice).toMatch(ONE_LINE);
      expect(notice.length).toBeLessThan(340);
    });

    it.each([
      [
        'a message starting with a blank line (Prisma style)',
        '\nInvalid `db.insert()` invocation',
        'Invalid',
      ],
      ['a whitespace-only first line', '   \nECONNRESET', 'ECONNRESET'],
      ['two sentences', 'Quota exceeded. Contact your administrator.', 'Quota exceeded'],
    ])('H4: the notice is one sentence that keeps the reason, for %s', (_case, message, reason) => {
      const notice = errorNotice(new Error(message));

      expect(notice).toMatch(ONE_LINE);
      expect(notice).toContain(reason);
      expect(notice.slice('[error] '.length)).not.toMatch(/[.!?]\s+\S/);
    });
  });
});
