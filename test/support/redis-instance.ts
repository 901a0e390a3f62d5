import { ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { delimiter, join } from 'node:path';
import { tmpdir } from 'node:os';
import { describeNeeding } from './describe-needing';
import { freePort } from './free-port';

/**
 * A Redis server of the test's own, in a temp directory on a port of its own, so a test can
 * configure, stop, freeze and restart it without touching the shared server of `TEST_REDIS_URL`.
 */

/** How long a start may take until PING answers, and a stop until the process exited (ms). */
const BOUND_MS = 5000;

/** Settings a test may override with `args` (anything else in `args` is added). */
const DEFAULTS: Record<string, string[]> = { save: [''], appendonly: ['no'] };

/** Servers still running, killed when the test process exits (a failed test's leftovers). */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Whether `program` is an executable file in a folder of PATH. */
function onPath(program: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((folder) => {
    try {
      accessSync(join(folder, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Why an own server cannot be started here, or `undefined` when it can. */
export function ownRedisUnavailable(): string | undefined {
  return onPath('redis-server') ? undefined : 'redis-server is not on PATH';
}

/**
 * `describe` for suites that start their own Redis. Without `redis-server`: outside CI skipped
 * with a title that says why; with `CI` set a failing test (never a silent skip in CI).
 */
export function describeOwnRedis(title: string, suite: () => void): void {
  describeNeeding(title, ownRedisUnavailable(), 'an own Redis server can be started', suite);
}

/**
 * Sends one command over a plain socket and resolves with the first line of the reply, or
 * `undefined` when the server closed the connection without one (as SHUTDOWN does). Rejects on
 * a refused connection or after `timeoutMs`. No client library: nothing retries or queues.
 */
export function rawCommand(
  port: number,
  args: string[],
  timeoutMs = 1000,
): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const finish = (error: Error | undefined, line?: string) => {
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(line);
    };
    const timer = setTimeout(() => finish(new Error(`no reply in ${timeoutMs} ms`)), timeoutMs);
    socket.on('connect', () => {
      const body = args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('');
      socket.write(`*${args.length}\r\n${body}`);
    });
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      const end = reply.indexOf('\r\n');
      if (end >= 0) finish(undefined, reply.slice(0, end));
    });
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(undefined, undefined));
  });
}

/** Command-line arguments: the fixed ones, the defaults `args` does not set, then `args`. */
function commandLine(dir: string, port: number, args: string[]): string[] {
  const given = new Set(args.filter((a) => a.startsWith('--')).map((a) => a.slice(2)));
  const defaults = Object.entries(DEFAULTS)
    .filter(([name]) => !given.has(name))
    .flatMap(([name, values]) => [`--${name}`, ...values]);
  const fixed = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir];
  const log = ['--daemonize', 'no', '--logfile', join(dir, 'redis.log')];
  return [...fixed, ...log, ...defaults, ...args];
}

/** An own Redis server: its URL, and how to stop, freeze, thaw, restart and remove it. */
export class RedisInstance {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** What the last start wrote to stderr (bad arguments are reported there, not in the log). */
  private stderr = '';

  private constructor(
    /** The temp directory: `--dir` (RDB and AOF files) and `redis.log`. */
    readonly dir: string,
    readonly port: number,
    private readonly args: string[],
  ) {}

  /** `redis://127.0.0.1:<port>`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Whether the server process is running (frozen counts as running). */
  get running(): boolean {
    return this.child !== undefined;
  }

  /**
   * Starts a server in a new temp directory on a free port and waits until it answers PING.
   * `args` are redis-server options (`['--appendonly', 'yes']`); they replace the defaults
   * `--save ""` and `--appendonly no` when they name them.
   */
  static async create(options: { args?: string[] } = {}): Promise<RedisInstance> {
    const dir = mkdtempSync(join(tmpdir(), 'agent-own-redis-'));
    const instance = new RedisInstance(dir, await freePort(), options.args ?? []);
    try {
      await instance.start();
    } catch (error) {
      await instance.remove();
      throw error;
    }
    return instance;
  }

  /** Starts the server (again: same port, arguments and directory) and waits for PING. */
  async start(): Promise<void> {
    if (this.child) throw new Error(`Redis on port ${this.port} is running already`);
    const child = spawn('redis-server', commandLine(this.dir, this.port, this.args), {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-2000);
    });
    this.child = child;
    running.add(child);
    this.exited = new Promise((done) => {
      const gone = () => {
        running.delete(child);
        if (this.child === child) this.child = undefined;
        done();
      };
      child.once('exit', gone);
      child.once('error', gone); // spawn failed: no exit event follows
    });
    await this.untilAnswering();
  }

  /**
   * Stops the server and resolves once the process exited. Soft (the default): `SHUTDOWN
   * NOSAVE`, falling back to SIGTERM when refused (e.g. renamed). Hard: SIGKILL, as in a crash.
   * A frozen server is thawed first. Past the bound a soft stop ends in SIGKILL.
   */
  async stop(options: { hard?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (options.hard) {
      child.kill('SIGKILL');
    } else {
      child.kill('SIGCONT');
      const reply = await rawCommand(this.port, ['SHUTDOWN', 'NOSAVE']).catch(() => 'refused');
      if (reply !== undefined) child.kill('SIGTERM');
    }
    const timer = setTimeout(() => child.kill('SIGKILL'), BOUND_MS);
    await this.exited;
    clearTimeout(timer);
  }

  /**
   * Freezes the server (SIGSTOP): connections stay open and new ones are accepted by the
   * kernel, but nothing answers.
   */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** Lets a frozen server go on (SIGCONT). */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** Stops the server (hard) if it runs and deletes its directory. Safe to call more than once. */
  async remove(): Promise<void> {
    await this.stop({ hard: true });
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Polls PING until it answers; fails (with the log's tail) when the process ends or after the bound. */
  private async untilAnswering(): Promise<void> {
    const deadline = Date.now() + BOUND_MS;
    let ended = false;
    void this.exited.then(() => (ended = true));
    for (;;) {
      const reply = await rawCommand(this.port, ['PING'], 500).catch(() => undefined);
      // -NOAUTH: up, with a password (`--requirepass`).
      if (reply === '+PONG' || reply?.startsWith('-NOAUTH')) return;
      if (ended || Date.now() > deadline) {
        if (!ended) await this.stop({ hard: true });
        throw new Error(`Redis on port ${this.port} did not answer PING: ${this.logTail()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** The last lines of stderr and `redis.log`, for a start that failed. */
  private logTail(): string {
    const log = join(this.dir, 'redis.log');
    const text = `${this.stderr}\n${existsSync(log) ? readFileSync(log, 'utf8') : ''}`;
    const lines = text.split('\n').filter((line) => line.trim() !== '');
    return lines.slice(-5).join(' | ') || '(nothing logged)';
  }
}
