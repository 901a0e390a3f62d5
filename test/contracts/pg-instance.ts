import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describeNeeding } from '../support/describe-needing';
import { freePort } from '../support/free-port';

/**
 * A PostgreSQL server of the test's own, in a temp directory on a port of its own, so a test can
 * stop, freeze and restart it without touching the shared server of `TEST_PG_URL`.
 */

const run = promisify(execFile);

/** The newest `/usr/lib/postgresql/<version>/bin` with `initdb` and `pg_ctl`, if any. */
export function findPgBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  return readdirSync(root)
    .filter((version) => /^\d+$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => join(root, version, 'bin'))
    .find((bin) => existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_ctl')));
}

/** The uid and gid of the `postgres` OS user, from /etc/passwd. */
function postgresUser(): { uid: number; gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Why an own server cannot be started here, or `undefined` when it can. */
export function ownPgUnavailable(): string | undefined {
  if (!findPgBin()) return 'no PostgreSQL binaries under /usr/lib/postgresql/*/bin';
  // initdb refuses to run as root: as root it runs as the postgres OS user.
  if (process.getuid?.() === 0 && !postgresUser()) return 'running as root without a postgres user';
  return undefined;
}

/**
 * `describe` for suites that start their own server. Without the binaries: outside CI skipped
 * with a title that says why; with `CI` set a failing test (never a silent skip in CI).
 */
export function describeOwnPg(title: string, suite: () => void): void {
  describeNeeding(title, ownPgUnavailable(), 'an own PostgreSQL server can be started', suite);
}

/** An own PostgreSQL server: its URL, and how to stop, freeze, thaw, restart and remove it. */
export class PgInstance {
  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
  ) {}

  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Creates a cluster in a new temp directory and starts it. */
  static async create(): Promise<PgInstance> {
    const bin = findPgBin();
    if (!bin) throw new Error('no PostgreSQL binaries');
    const dir = mkdtempSync(join(tmpdir(), 'agent-own-pg-'));
    const instance = new PgInstance(bin, dir, await freePort());
    try {
      const user = postgresUser();
      if (process.getuid?.() === 0 && user) chownSync(dir, user.uid, user.gid);
      await instance.pg('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres']);
      await instance.start();
    } catch (error) {
      await instance.remove();
      throw error;
    }
    return instance;
  }

  /** Starts the server and waits until it accepts connections. */
  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    await this.pg('pg_ctl', [
      '-D',
      this.data,
      '-l',
      join(this.dir, 'log'),
      '-o',
      options,
      '-w',
      'start',
    ]);
  }

  /** Stops the server the hard way (`-m immediate`: connections are cut, as in a crash). */
  async stop(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
  }

  /**
   * Freezes the whole server (`SIGSTOP` to the postmaster and every backend): connections stay
   * open and new ones are accepted by the kernel, but nothing answers.
   */
  freeze(): void {
    for (const pid of this.processes()) signal(pid, 'SIGSTOP');
  }

  /** Lets a frozen server go on (`SIGCONT`). */
  thaw(): void {
    for (const pid of this.processes()) signal(pid, 'SIGCONT');
  }

  /** Thaws, stops (if running) and deletes the cluster. Safe to call more than once. */
  async remove(): Promise<void> {
    if (existsSync(join(this.data, 'postmaster.pid'))) {
      this.thaw();
      await this.stop().catch(() => undefined);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private get data(): string {
    return join(this.dir, 'data');
  }

  /** The postmaster (first line of postmaster.pid) and its children, from /proc. */
  private processes(): number[] {
    const pidFile = join(this.data, 'postmaster.pid');
    if (!existsSync(pidFile)) return [];
    const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    const children = readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          // Field 4 of /proc/<pid>/stat is the parent pid; field 2 (the name) may hold spaces.
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
        } catch {
          return false; // the process ended meanwhile
        }
      })
      .map(Number);
    return [postmaster, ...children];
  }

  /** Runs a PostgreSQL program, as the postgres OS user when this process is root. */
  private async pg(program: string, args: string[]): Promise<void> {
    const command = join(this.bin, program);
    if (process.getuid?.() !== 0) {
      await run(command, args);
      return;
    }
    const quoted = [command, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    await run('su', ['postgres', '-c', quoted]);
  }
}

/**
 * Sends `sig` to `pid`; a process that ended between listing and signalling (a backend that
 * exited, the postmaster gone while its pid file stays) is no error: there is nothing to signal.
 */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
