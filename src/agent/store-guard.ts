import {
  AgentError,
  StoreUnavailableError,
  type HistoryStore,
  type InputInbox,
  type MessageArchive,
  type SessionStore,
} from '../contracts';

/** The methods of a port that return Promises. */
type AsyncMethods<T> = {
  [K in keyof T]-?: NonNullable<T[K]> extends (...args: any[]) => Promise<unknown> ? K : never;
}[keyof T];

/**
 * A store port whose failures speak plain words: any rejection that is not one of the
 * library's own errors (a driver's text, a host store's bug) becomes a `StoreUnavailableError`
 * naming the store and the operation, with the original as its `cause` for the log. The errors
 * the ports promise (`SessionNotFoundError`, ...) pass unchanged. Other members pass through.
 */
export function guardStore<T extends object>(
  port: T,
  store: string,
  methods: readonly AsyncMethods<T>[],
): T {
  const guarded = Object.create(port) as T;
  type Method = (...args: unknown[]) => Promise<unknown>;
  for (const name of methods) {
    if (typeof port[name] !== 'function') continue;
    const operation = String(name);
    const translate = (error: unknown): never => {
      throw error instanceof AgentError
        ? error
        : new StoreUnavailableError(store, operation, { cause: error });
    };
    Object.defineProperty(guarded, name, {
      // Looked up at each call, so a port patched later (a spy, a reconnect) is the one called.
      value: (...args: unknown[]) => {
        try {
          return (port[name] as unknown as Method).apply(port, args).catch(translate);
        } catch (error) {
          return Promise.resolve().then(() => translate(error));
        }
      },
    });
  }
  return guarded;
}

/** The stores as the agent uses them: guarded (see `guardStore`). */
export interface GuardedStores {
  sessions: SessionStore;
  history: HistoryStore;
  archive: MessageArchive;
  inbox: InputInbox;
}

/** Injection token of the guarded stores. @internal */
export const GUARDED_STORES = Symbol.for('agent:guarded_stores');

/** Wraps the three store ports. */
export function guardStores(
  sessions: SessionStore,
  history: HistoryStore,
  archive: MessageArchive,
  inbox: InputInbox,
): GuardedStores {
  return {
    sessions: guardStore(sessions, 'sessions', [
      'get',
      'ensure',
      'update',
      'delete',
      'generationOf',
      'advanceGeneration',
      'list',
      'listByActivity',
    ]),
    history: guardStore(history, 'history', [
      'history',
      'readonlyHistory',
      'count',
      'clear',
      'rollbackTurn',
      'deleteSession',
    ]),
    archive: guardStore(archive, 'archive', ['append']),
    inbox: guardStore(inbox, 'inbox', [
      'accept',
      'enterTurn',
      'settle',
      'get',
      'unsettled',
      'prune',
      'deleteSession',
    ]),
  };
}
