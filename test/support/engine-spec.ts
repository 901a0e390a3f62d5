/**
 * The shared frame of the engine's unit specs: one `TokenEstimator` per spec file (it owns
 * worker threads, so it is created once and disposed after the file), the check that no
 * unmocked method was called, silenced logger spies, and the fixtures built around that
 * estimator.
 *
 * NOTE: `jest` hooks come from `@jest/globals`, as in `turn-fixtures.ts`.
 */
import { afterAll, beforeAll } from '@jest/globals';
import type { IncomingMessage, SessionSettings } from '../../src/contracts';
import { TokenEstimator } from '../../src/usage';
import type { Turn } from '../../src/agent/engine/turn';
import type { TurnState } from '../../src/agent/engine/turn-state';
import {
  failOnUnmockedCalls,
  newState,
  newTurn,
  newTurnDeps,
  spyOnLogger,
  type LoggerSpies,
  type TurnDepsOptions,
  type TurnFixture,
} from './turn-fixtures';

/** Options of `EngineSpec.turnState`. */
export interface TurnStateOptions extends TurnDepsOptions {
  /** The turn's opening inputs; one human input by default. */
  inputs?: Partial<IncomingMessage>[];
  /** The session's settings, as the runner reads them. */
  settings?: Partial<SessionSettings>;
}

/** The ports of a turn plus the turn and its state. */
export interface TurnStateFixture extends TurnFixture {
  turn: Turn;
  state: TurnState;
}

/** What `useEngineSpec` gives a spec. */
export interface EngineSpec {
  /** The spec file's estimator; there is one only while the file's tests run. */
  readonly estimator: TokenEstimator;
  /** The logger spies of the running test (`log`, `warn`, `error`). */
  readonly logs: LoggerSpies;
  /** `newTurnDeps` around the spec's estimator. */
  turnDeps(options?: TurnDepsOptions): TurnFixture;
  /** `turnDeps`, then a turn of `inputs` and its state with the model resolved. */
  turnState(options?: TurnStateOptions): TurnStateFixture;
}

/**
 * Registers the frame's hooks; call at the top of the spec's outer `describe`. Use `estimator`
 * and the fixtures inside tests (or hooks), not while the `describe` is being collected.
 */
export function useEngineSpec(): EngineSpec {
  let current: TokenEstimator | undefined;
  beforeAll(() => {
    current = new TokenEstimator();
  });
  afterAll(async () => {
    await current?.dispose();
    current = undefined;
  });
  failOnUnmockedCalls();
  const logs = spyOnLogger();
  const estimator = (): TokenEstimator => {
    if (!current) throw new Error('useEngineSpec: the estimator exists only while tests run');
    return current;
  };
  const turnDeps = (options: TurnDepsOptions = {}) => newTurnDeps(estimator(), options);
  return {
    get estimator() {
      return estimator();
    },
    logs,
    turnDeps,
    turnState: (options: TurnStateOptions = {}) => {
      const fixture = turnDeps(options);
      const turn = newTurn(options.inputs);
      return { ...fixture, turn, state: newState(fixture.deps, turn, options.settings) };
    },
  };
}
