import {
  SqliteDialect,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  type SqliteDialectConfig,
  type TransactionSettings,
} from 'kysely';

/**
 * NOTE: why SQLite connections to one file take turns within a process. better-sqlite3 is
 * synchronous: while one connection is inside a transaction (between two awaits), a second
 * connection of the same process that wants to write waits in SQLite's busy handler, which
 * blocks the event loop, so the first can never commit, and after `busy_timeout` the second
 * fails with "database is locked". Connections of one process therefore share a queue per file.
 * Other processes are real concurrency and are left to `busy_timeout`.
 */

/** A FIFO async lock shared by the connections of this process to one SQLite file. @internal */
export class FileLock {
  private tail: Promise<void> = Promise.resolve();
  private users = 0;

  private constructor(private readonly path: string) {}

  /** The lock of `path` (a resolved file path); call `release()` when the connection closes. */
  static retain(path: string): FileLock {
    const lock = locks.get(path) ?? new FileLock(path);
    locks.set(path, lock);
    lock.users++;
    return lock;
  }

  /** Forgets the lock once the last connection to its file has closed. */
  release(): void {
    if (--this.users === 0 && locks.get(this.path) === this) locks.delete(this.path);
  }

  /** Resolves with the unlock function once every earlier holder has unlocked. */
  acquire(): Promise<() => void> {
    let unlock!: () => void;
    const unlocked = new Promise<void>((done) => (unlock = done));
    const turn = this.tail.then(() => unlock);
    this.tail = this.tail.then(() => unlocked);
    return turn;
  }
}

/** One lock per resolved file path, for the whole process. */
const locks = new Map<string, FileLock>();

/**
 * Kysely's `SqliteDialect` whose connection takes turns, through `lock`, with every other
 * connection of this process to the same file (see the note above). No lock (`:memory:`): as is.
 * @internal
 */
export class FileLockedSqliteDialect extends SqliteDialect {
  constructor(
    config: SqliteDialectConfig,
    private readonly lock: FileLock | undefined,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    const inner = super.createDriver();
    return this.lock ? new FileLockedDriver(inner, this.lock) : inner;
  }
}

/** Wraps a SQLite driver: a connection is acquired only with the file's lock held. */
class FileLockedDriver implements Driver {
  private unlock: (() => void) | undefined;

  constructor(
    private readonly inner: Driver,
    private readonly lock: FileLock,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const unlock = await this.lock.acquire();
    try {
      const connection = await this.inner.acquireConnection();
      this.unlock = unlock;
      return connection;
    } catch (error) {
      unlock();
      throw error;
    }
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const unlock = this.unlock;
    this.unlock = undefined;
    try {
      await this.inner.releaseConnection(connection);
    } finally {
      unlock?.();
    }
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.inner.beginTransaction(connection, settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(connection);
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction(connection);
  }

  savepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    return this.inner.savepoint!(connection, name, compile);
  }

  rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    return this.inner.rollbackToSavepoint!(connection, name, compile);
  }

  releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    return this.inner.releaseSavepoint!(connection, name, compile);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }
}
