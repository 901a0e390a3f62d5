import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describeNeeding } from './describe-needing';
import { freePort } from './free-port';

/** The repository's load balancer configuration (`deploy/nginx.conf`). */
const DEPLOY_CONF = resolve(__dirname, '..', '..', 'deploy', 'nginx.conf');

/** Why nginx cannot be run here, or `undefined` when it can. */
function nginxMissing(): string | undefined {
  const probe = spawnSync('nginx', ['-v'], { stdio: 'ignore' });
  return probe.error || probe.status !== 0 ? 'nginx is not installed' : undefined;
}

/** `describe` for suites that run nginx: skipped with the reason outside CI, failing in CI. */
export function describeNginx(title: string, suite: () => void): void {
  describeNeeding(title, nginxMissing(), 'nginx can be run', suite);
}

/** Whether something accepts connections on the port. */
function accepting(port: number): Promise<boolean> {
  return new Promise((answer) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      answer(true);
    });
    socket.once('error', () => answer(false));
  });
}

/**
 * `deploy/nginx.conf` as the deployment ships it, run by a real nginx on a port of its own with
 * the upstream servers replaced by the test's, and a header naming the upstream that answered
 * (so a test can see the round robin). Its files live in a temp directory, removed on `stop`.
 */
export class NginxBalancer {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    readonly url: string,
  ) {}

  static async start(upstreams: string[]): Promise<NginxBalancer> {
    const dir = mkdtempSync(join(tmpdir(), 'agent-nginx-'));
    const port = await freePort();
    const shipped = readFileSync(DEPLOY_CONF, 'utf8');
    const servers = upstreams.map((u) => `  server ${new URL(u).host};`).join('\n');
    const site = shipped
      .replace(/upstream agents \{[^}]*\}/, `upstream agents {\n${servers}\n}`)
      .replace(
        /listen 80;/,
        `listen 127.0.0.1:${port};\n  add_header X-Upstream $upstream_addr always;`,
      );
    if (site === shipped) throw new Error('deploy/nginx.conf no longer has the expected shape');
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
      .map((kind) => `${kind}_temp_path ${join(dir, kind)};`)
      .join('\n  ');
    writeFileSync(
      join(dir, 'nginx.conf'),
      `daemon off;\nuser root;\nworker_processes 1;\npid ${join(dir, 'nginx.pid')};\n` +
        `error_log ${join(dir, 'error.log')} warn;\nevents { worker_connections 256; }\n` +
        `http {\n  access_log off;\n  ${temp}\n${site}\n}\n`,
    );
    const child = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const deadline = Date.now() + 5000;
    while (!(await accepting(port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`nginx did not start: ${stderr.trim()}`);
      }
      await new Promise((next) => setTimeout(next, 50));
    }
    return new NginxBalancer(child, dir, `http://127.0.0.1:${port}`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((done) => this.child.once('exit', done));
      this.child.kill('SIGQUIT');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
