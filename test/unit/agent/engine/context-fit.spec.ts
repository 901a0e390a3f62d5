import fc from 'fast-check';
import type { ModelMessage, ToolDefinition } from '../../../../src/contracts';
import { bucketMessages, classifyMessage, UsageBucketer } from '../../../../src/usage';
import { budgetOf, fitCall } from '../../../../src/agent/engine/context-fit';
import { useEngineSpec, type TurnStateOptions } from '../../../support/engine-spec';
import {
  newHistoryMessage,
  newInputMessage,
  newState,
  newSystemMessage,
  ScriptedModel,
} from '../../../support/turn-fixtures';

/** A history of `n` alternating user/assistant messages of about `words` tokens each. */
function newHistory(n: number, words = 40): ModelMessage[] {
  return Array.from({ length: n }, (_, i) =>
    newHistoryMessage(
      i % 2 ? 'assistant' : 'user',
      `message ${i}: ${Array.from({ length: words }, (_w, k) => `word${k}`).join(' ')}`,
      `h${i}`,
    ),
  );
}

const bigTool: ToolDefinition = {
  name: 'search',
  description: 'Searches. '.repeat(200),
  parameters: { type: 'object', properties: { q: { type: 'string' } } },
};

describe('fitCall (context fit)', () => {
  const spec = useEngineSpec();

  function setup(options: TurnStateOptions = {}) {
    const { deps, state } = spec.turnState(options);
    const encoding = deps.estimator.encodingFor('scripted-model');
    const count = (m: ModelMessage) => deps.estimator.countMessage(m, encoding);
    /** The U4 quantity: history + tool-result tokens of a list. */
    const historyTokens = (list: readonly ModelMessage[]) =>
      list
        .filter((m) => ['history', 'toolResults'].includes(classifyMessage(m).bucket))
        .reduce((sum, m) => sum + count(m), 0);
    const total = (list: readonly ModelMessage[]) => list.reduce((sum, m) => sum + count(m), 0);
    return { deps, state, count, historyTokens, total };
  }

  describe('budgetOf', () => {
    it('uses the tokenBudget option when set', () => {
      const { deps, state } = setup({ agent: { tokenBudget: 5000 } });

      expect(budgetOf(deps, state)).toBe(5000);
    });

    it('else derives it from the model: max(1024, contextWindow - maxOutputTokens - 512)', () => {
      const roomy = setup();
      const tiny = setup({
        provider: new ScriptedModel({
          capabilities: { contextWindow: 1500, maxOutputTokens: 400 },
        }),
      });

      expect(budgetOf(roomy.deps, roomy.state)).toBe(128_000 - 1024 - 512);
      expect(budgetOf(tiny.deps, tiny.state)).toBe(1024);
    });
  });

  describe('within budget', () => {
    it('U3: nothing is removed and trimmed stays false; the first call still takes over the working list', () => {
      const { deps, state, historyTokens } = setup();
      const list = [newSystemMessage(), ...newHistory(4), newInputMessage()];

      const fitted = fitCall(deps, state, list, [], true);

      expect(fitted.messages).toEqual(list);
      expect(state.working).toEqual(fitted.messages);
      // A copy: the sent list must not grow with the turn (it is agent:llm:after's `messages`).
      expect(state.working).not.toBe(fitted.messages);
      expect(state).toMatchObject({ trimmed: false, historyCut: 0 });
      expect(fitted.untrimmedHistory).toBe(historyTokens(list));
    });
  });

  describe('first call of a turn', () => {
    it('U3: a hard trim replaces the working list with the trimmed one and remembers what was cut', () => {
      const { deps, state, historyTokens, total } = setup({ agent: { tokenBudget: 400 } });
      const list = [newSystemMessage(), ...newHistory(12), newInputMessage()];
      expect(total(list)).toBeGreaterThan(400);

      const fitted = fitCall(deps, state, list, [], true);

      expect(state.trimmed).toBe(true);
      expect(state.working).toEqual(fitted.messages);
      // A copy: the sent list must not grow with the turn (it is agent:llm:after's `messages`).
      expect(state.working).not.toBe(fitted.messages);
      expect(fitted.messages.length).toBeLessThan(list.length);
      expect(fitted.messages[0]).toBe(list[0]);
      expect(fitted.messages.at(-1)).toBe(list.at(-1));
      expect(state.historyCut).toBe(historyTokens(list) - historyTokens(fitted.messages));
      expect(state.historyCut).toBeGreaterThan(0);
      expect(fitted.untrimmedHistory).toBe(historyTokens(list));
    });

    it('U3: history beyond its share of the budget loses its oldest segments even when the whole request fits', () => {
      const { deps, state, historyTokens, total } = setup({
        agent: { tokenBudget: 4000, trimming: { historyShare: 0.1 } },
      });
      const list = [newSystemMessage(), ...newHistory(12), newInputMessage()];
      expect(total(list)).toBeLessThan(4000);

      const fitted = fitCall(deps, state, list, [], true);

      expect(state.trimmed).toBe(true);
      expect(historyTokens(fitted.messages)).toBeLessThanOrEqual(400);
      // The oldest go first: what is kept is the newest part of history.
      expect(fitted.messages.at(-2)).toBe(list.at(-2));
      expect(fitted.messages).not.toContain(list[1]);
    });

    it('U3: an estimate over the budget sets trimmed even when nothing could be removed', () => {
      const { deps, state } = setup({ agent: { tokenBudget: 50 } });
      const list = [newSystemMessage(), newInputMessage('word '.repeat(200))];

      const fitted = fitCall(deps, state, list, [], true);

      expect(fitted.messages).toEqual(list);
      expect(state.trimmed).toBe(true);
      expect(state.historyCut).toBe(0);
    });

    it('U3: the tool definitions count against the budget', () => {
      const { deps, state, total } = setup({ agent: { tokenBudget: 600 } });
      const list = [newSystemMessage(), ...newHistory(4), newInputMessage()];
      expect(total(list)).toBeLessThan(600);

      const without = newState(deps);
      fitCall(deps, without, list, [], true);
      fitCall(deps, state, list, [bigTool], true);

      expect(without.trimmed).toBe(false);
      expect(state.trimmed).toBe(true);
    });
  });

  describe('later calls', () => {
    it('U3: trim into a copy: the working list and the remembered cut stay as the first call left them', () => {
      const { deps, state } = setup({ agent: { tokenBudget: 400 } });
      fitCall(deps, state, [newSystemMessage(), ...newHistory(12), newInputMessage()], [], true);
      const working = state.working;
      const snapshot = [...working];
      const cut = state.historyCut;
      const later = [...working, ...newHistory(6, 60)];

      const fitted = fitCall(deps, state, later, [], false);

      expect(state.working).toBe(working);
      expect(state.working).toEqual(snapshot);
      expect(state.historyCut).toBe(cut);
      expect(fitted.messages).not.toBe(later);
      expect(fitted.messages.length).toBeLessThan(later.length);
    });

    it('U3: trimmed is sticky: a later call that fits still reports trimmed', () => {
      const { deps, state } = setup({ agent: { tokenBudget: 400 } });
      fitCall(deps, state, [newSystemMessage(), ...newHistory(12), newInputMessage()], [], true);

      fitCall(deps, state, [newSystemMessage(), newInputMessage('short')], [], false);

      expect(state.trimmed).toBe(true);
    });

    it('U3: a fresh turn state starts untrimmed', () => {
      const { deps, state } = setup({ agent: { tokenBudget: 400 } });
      fitCall(deps, state, [newSystemMessage(), ...newHistory(12), newInputMessage()], [], true);

      const next = newState(deps);

      expect(next.trimmed).toBe(false);
      expect(next.historyCut).toBe(0);
    });

    it('U4: untrimmedHistory = history + tool results of this call before trimming + what the first call cut', () => {
      const { deps, state, historyTokens } = setup({ agent: { tokenBudget: 400 } });
      fitCall(deps, state, [newSystemMessage(), ...newHistory(12), newInputMessage()], [], true);
      const group: ModelMessage[] = [
        {
          role: 'assistant',
          content: '',
          toolCalls: [
            { id: 'p1', type: 'function', function: { name: 'search', arguments: '{"q":"x"}' } },
          ],
        },
        { role: 'tool', content: 'result '.repeat(120), toolCallId: 'p1' },
      ];
      const later = [...state.working, ...group];

      const fitted = fitCall(deps, state, later, [], false);

      expect(state.historyCut).toBeGreaterThan(0);
      expect(fitted.untrimmedHistory).toBe(historyTokens(later) + state.historyCut);
    });
  });

  describe('with the list total from the precount (one walk when it fits)', () => {
    it('U3, U4: fits the same as without it, for lists within and beyond the allowance and the budget', () => {
      let onePass = 0;
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 14 }),
          fc.integer({ min: 1, max: 60 }),
          fc.constantFrom(300, 1200, 4000, 128_000),
          fc.constantFrom(0.1, 0.6, 1),
          fc.boolean(),
          fc.boolean(),
          (n, words, tokenBudget, historyShare, withTool, first) => {
            const list = [newSystemMessage(), ...newHistory(n, words), newInputMessage()];
            const tools = withTool ? [bigTool] : [];
            const plain = setup({ agent: { tokenBudget, trimming: { historyShare } } });
            const told = setup({ agent: { tokenBudget, trimming: { historyShare } } });
            const encoding = told.deps.estimator.encodingFor('scripted-model');
            const listTokens = told.deps.estimator.countMessages(list, encoding);
            // The precount's own pass buckets the list as it goes (every count known by now).
            const bucketer = new UsageBucketer();
            expect(told.deps.estimator.precount(list, encoding, bucketer.add)).toBe(listTokens);
            expect(bucketer.added).toBe(list.length);

            const without = fitCall(plain.deps, plain.state, list, tools, first);
            const withTotal = fitCall(told.deps, told.state, list, tools, first, {
              tokens: listTokens,
              bucketer,
            });

            const { bucketed, ...fitted } = withTotal;
            expect(fitted).toEqual(without);
            // When nothing could be cut, the walk also made the call's usage buckets.
            if (bucketed) {
              onePass++;
              expect(without.messages).toEqual(list);
              expect(bucketed).toEqual(
                bucketMessages(
                  list,
                  told.count,
                  told.deps.estimator.countTools(tools, encoding),
                  told.state.model!.capabilities.maxOutputTokens,
                ),
              );
            }
            expect(told.state).toMatchObject({
              trimmed: plain.state.trimmed,
              historyCut: plain.state.historyCut,
            });
            expect(told.state.working).toEqual(plain.state.working);
          },
        ),
        { numRuns: 60 },
      );
      // Both ways were taken: lists that fit (one walk) and lists that were cut.
      expect(onePass).toBeGreaterThan(0);
      expect(onePass).toBeLessThan(60);
    });
  });
});
