import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { TEST_TOKEN } from './api-app';
import { REDIS_URL } from './redis-test';

const ROOT = resolve(__dirname, '..', '..');
/** Colour codes (ESC [ ... m), in case the logger colours despite NO_COLOR. */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

let instance = 0;

/** How a server process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * `src/main.ts` run as a child process (`node -r @swc-node/register`), as an operator runs the
 * server: its own environment, its output captured, signals sent to it by pid.
 */
export class ServerProcess {
  private out = '';
  private err = '';
  private readonly outputWaiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void }[] =
    [];
  /** Resolves once the process has exited. */
  readonly exited: Promise<Exit>;

  private constructor(
    readonly child: ChildProcess,
    private readonly dbFile: string,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => this.onOutput('out', chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => this.onOutput('err', chunk));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        rmSync(this.dbFile, { force: true });
        resolve({ code, signal });
      }),
    );
  }

  /** Starts the server with `env` on top of a clean environment (port 0 unless given). */
  static start(env: Record<string, string>): ServerProcess {
    const dbFile = join(tmpdir(), `agent-server-e2e-${process.pid}-${++instance}.sqlite`);
    const child = spawn(process.execPath, ['-r', '@swc-node/register', 'src/main.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'test',
        NO_COLOR: '1',
        PORT: '0',
        HOST: '127.0.0.1',
        AGENT_DB: dbFile,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new ServerProcess(child, dbFile);
  }

  /** Standard output so far, without colours. */
  get stdout(): string {
    return this.out.replace(ANSI, '');
  }

  /** Standard error so far, without colours. */
  get stderr(): string {
    return this.err.replace(ANSI, '');
  }

  /** Resolves when the output (stdout or stderr) matches, with the match. */
  waitForOutput(pattern: RegExp): Promise<RegExpMatchArray> {
    const seen = (this.stdout + this.stderr).match(pattern);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      this.outputWaiters.push({ pattern, resolve });
      void this.exited.then((exit) =>
        reject(
          new Error(
            `exited (${JSON.stringify(exit)}) before printing ${pattern}:\n${this.stdout}${this.stderr}`,
          ),
        ),
      );
    });
  }

  /** The URL the server listens on, once it says so (in a text or a JSON log line). */
  async url(): Promise<string> {
    const [, url] = await this.waitForOutput(/Listening on (http:\/\/[^\s"]+)/);
    return url;
  }

  /** Sends a signal by pid (no-op once exited). */
  signal(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }

  private onOutput(stream: 'out' | 'err', chunk: string): void {
    if (stream === 'out') this.out += chunk;
    else this.err += chunk;
    const text = this.stdout + this.stderr;
    for (const waiter of [...this.outputWaiters]) {
      const match = text.match(waiter.pattern);
      if (!match) continue;
      this.outputWaiters.splice(this.outputWaiters.indexOf(waiter), 1);
      waiter.resolve(match);
    }
  }
}

/**
 * The environment of a server process in distributed mode on the test's services: the admin
 * token of the API tests, the model server, one PostgreSQL database, the Redis test server with
 * the test's key prefix, the instance's own id and a short lease (2 s).
 */
export function distributedServerEnv(setup: {
  modelUrl: string;
  dbUrl: string;
  prefix: string;
  instanceId: string;
}): Record<string, string> {
  return {
    AGENT_ADMIN_TOKEN: TEST_TOKEN,
    LLM_BASE_URL: setup.modelUrl,
    LLM_MODEL: 'test-model',
    AGENT_DB: setup.dbUrl,
    REDIS_URL,
    AGENT_QUEUE_PREFIX: setup.prefix,
    AGENT_INSTANCE_ID: setup.instanceId,
    AGENT_LEASE_MS: '2000',
  };
}
