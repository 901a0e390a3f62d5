import type { TestingModuleBuilder } from '@nestjs/testing';
import {
  HistoryStore,
  InputInbox,
  MessageArchive,
  SessionStore,
  StoreUnavailableError,
} from '../../src/contracts';
import { MemoryInputInbox, MemoryMessageLog, MemorySessionStore } from '../../src/session-bridge';

/** How the stores behave: normally, failing with `StoreUnavailableError`, or never answering. */
export type StoreMode = 'ok' | 'fail' | 'hang';

/** The driver text a failing store carries as its cause: it must never reach a client. */
export const DRIVER_TEXT = 'connect ECONNREFUSED 10.9.8.7:5432 (pg host db-internal.example)';

/**
 * In-memory session and history stores whose every call can be switched to fail (as an
 * adapter reports an outage: `StoreUnavailableError` naming the store, the driver's error as
 * its cause) or to hang (held until the mode changes back, then run).
 */
export class SwitchableStores {
  private current: StoreMode = 'ok';
  private readonly held: (() => void)[] = [];
  readonly sessions = this.wrap('sessions', new MemorySessionStore());
  readonly log = this.wrap('history', new MemoryMessageLog());
  readonly inbox = this.wrap('inbox', new MemoryInputInbox());

  get mode(): StoreMode {
    return this.current;
  }

  /** Switches the mode; leaving `hang` runs the held calls. */
  set mode(mode: StoreMode) {
    this.current = mode;
    if (mode !== 'hang') for (const run of this.held.splice(0)) run();
  }

  /** Binds the stores in a testing module (for `ApiApp.start({ override })`). */
  readonly override = (builder: TestingModuleBuilder): TestingModuleBuilder =>
    builder
      .overrideProvider(SessionStore)
      .useValue(this.sessions)
      .overrideProvider(HistoryStore)
      .useValue(this.log)
      .overrideProvider(MessageArchive)
      .useValue(this.log)
      .overrideProvider(InputInbox)
      .useValue(this.inbox);

  private wrap<T extends object>(store: string, target: T): T {
    return new Proxy(target, {
      get: (object, property, receiver) => {
        const value = Reflect.get(object, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          const call = () => (value as (...a: unknown[]) => unknown).apply(object, args);
          if (this.current === 'fail') {
            const cause = new Error(DRIVER_TEXT);
            return Promise.reject(new StoreUnavailableError(store, String(property), { cause }));
          }
          if (this.current === 'hang') {
            return new Promise((resolve, reject) =>
              this.held.push(() => {
                Promise.resolve().then(call).then(resolve, reject);
              }),
            );
          }
          return call();
        };
      },
    });
  }
}
