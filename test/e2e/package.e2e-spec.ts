import { spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { FakeOpenAiServer } from '../../src/testing';
import { describePg, tempPgSchema } from '../contracts/sql-test-db';
import { deletePrefix, describeRedis, REDIS_URL, testPrefix } from '../support/redis-test';

/**
 * The package as a host gets it: the library is built and packed (`npm pack`, so `files`,
 * `main`, `types` and `exports` are what is tested), installed into `examples/host-app` in a
 * temporary folder, the example is built with its own TypeScript and run against a local
 * OpenAI-compatible server. Once with the NestJS 11 packages, once with NestJS 12 (ESM
 * packages, which a CommonJS host loads through Node's require(esm)). The installs use the
 * npm registry (or its cache): slow, hence the timeouts.
 */
jest.setTimeout(300_000);

const ROOT = resolve(__dirname, '..', '..');
const EXAMPLE = join(ROOT, 'examples', 'host-app');
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  files: string[];
};

/**
 * Packages the repository's server needs but the library must never bring into a host: a host
 * has one only when its own package.json asks for it (this example does for the API entry's
 * optional peers, not for the stores' or Anthropic's).
 */
const SERVER_ONLY = [
  '@nestjs/platform-express',
  '@nestjs/platform-socket.io',
  '@nestjs/swagger',
  '@nestjs/terminus',
  '@nestjs/throttler',
  '@nestjs/websockets',
  'class-validator',
  'prom-client',
  'better-sqlite3',
  'pg',
  '@anthropic-ai/sdk',
  '@opentelemetry/sdk-node',
];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of child processes: without what `npm test` injects for its own package
 * (a child npm would otherwise act on the repository), and without NODE_ENV=test.
 */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_(package_|lifecycle_|config_local_prefix)/i.test(key)) continue;
    if (key === 'INIT_CWD' || key === 'NODE_ENV') continue;
    env[key] = value;
  }
  return { ...env, NO_COLOR: '1', ...extra };
}

/** Runs a command to its end (killed after `timeoutMs`) and returns its exit code and output. */
function run(
  command: string,
  args: string[],
  cwd: string,
  env = childEnv(),
  timeoutMs = 240_000,
): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** Runs a command and throws with its output when it fails. */
async function must(
  command: string,
  args: string[],
  cwd: string,
  extraEnv?: Record<string, string>,
): Promise<Run> {
  const result = await run(command, args, cwd, childEnv(extraEnv));
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) exited ${result.code}\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result;
}

/** Every installed package under `modules` (nested ones too): name -> versions, one per copy. */
function installedPackages(modules: string, found = new Map<string, string[]>()) {
  if (!existsSync(modules)) return found;
  for (const entry of readdirSync(modules)) {
    if (entry.startsWith('.')) continue;
    const dirs = entry.startsWith('@')
      ? readdirSync(join(modules, entry)).map((name) => join(modules, entry, name))
      : [join(modules, entry)];
    for (const dir of dirs) {
      const manifest = join(dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const { name, version } = JSON.parse(readFileSync(manifest, 'utf8'));
      found.set(name, [...(found.get(name) ?? []), version]);
      installedPackages(join(dir, 'node_modules'), found);
    }
  }
  return found;
}

const npmInstall = ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

/** The library's own peer ranges (the host installs what they allow). */
const PEERS = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    peerDependencies: Record<string, string>;
  }
).peerDependencies;

/**
 * A host of distributed mode, in CommonJS as a NestJS 11 or 12 host writes it: one instance,
 * one input through a wake job (`runWhereReceived: false`), its settlement printed as JSON.
 */
const DISTRIBUTED_HOST = `
require('reflect-metadata');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { EventEmitterModule } = require('@nestjs/event-emitter');
const agent = require('${PACKAGE.name}');
(async () => {
  const stores = await agent.createSqlStores(process.env.DB_URL, { fencing: new agent.LeaseFencing() });
  const options = {
    llmProvider: new agent.OpenAiCompatibleProvider({ baseURL: process.env.LLM_BASE_URL, defaultModel: 'fake-model' }),
    sessionStore: stores.sessions,
    historyStore: stores.log,
    messageArchive: stores.log,
    inputInbox: stores.inbox,
    onShutdown: () => stores.close(),
    distribution: {
      redis: process.env.REDIS_URL, prefix: process.env.PREFIX, instanceId: 'host-1', stores, runWhereReceived: false,
    },
  };
  class HostModule {}
  Module({
    imports: [EventEmitterModule.forRoot({ delimiter: ':', wildcard: true }), agent.AgentModule.forRoot(options)],
  })(HostModule);
  const app = await NestFactory.createApplicationContext(HostModule, { logger: ['error'] });
  await app.init();
  const settlement = await app.get(agent.AgentService).handleMessage({ sessionId: 'dist-1', content: 'Hello' });
  console.log(JSON.stringify(settlement));
  console.log('[bullmq] @nestjs/bullmq ' + require('@nestjs/bullmq/package.json').version);
  await app.close();
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

describe('the packed library in a host application (examples/host-app)', () => {
  let work: string;
  let tarball: string;
  let packed: string[];
  let server: FakeOpenAiServer;
  /** The NestJS 12 host, once installed (the distributed test runs in it). */
  let nest12App: string | undefined;
  // require(esm) is on by default from Node 20.19 / 22.12; older 20.x/22.x need the flag.
  const requireEsmFlags = process.features.require_module ? [] : ['--experimental-require-module'];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'agent-package-'));
    // A fresh build in a staging folder, so stale files of ./dist cannot reach the tarball.
    const stage = join(work, 'stage');
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    await must(
      process.execPath,
      [tsc, '-p', 'tsconfig.build.json', '--outDir', join(stage, 'dist')],
      ROOT,
    );
    // The rest of `npm run build`: the dashboard's files beside its module.
    await must('npm', ['run', '--silent', 'build:assets'], ROOT, {
      ASSETS_OUT: join(stage, 'dist'),
    });
    cpSync(join(ROOT, 'package.json'), join(stage, 'package.json'));
    const extras = PACKAGE.files.filter((f) => !f.startsWith('!') && !f.startsWith('dist'));
    for (const file of ['README.md', ...extras]) {
      if (existsSync(join(ROOT, file))) cpSync(join(ROOT, file), join(stage, file));
    }
    const pack = await must('npm', ['pack', '--json', '--pack-destination', work], stage);
    const [info] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
    tarball = join(work, basename(info.filename));
    packed = info.files.map((f) => f.path);
    server = await FakeOpenAiServer.start();
  });

  afterAll(async () => {
    await server?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /**
   * Copies the example into `name`, points its library dependency at the tarball (and the
   * given packages at other versions), installs, builds, and returns the folder.
   */
  async function installExample(name: string, versions: Record<string, string> = {}) {
    const app = join(work, name);
    cpSync(EXAMPLE, app, {
      recursive: true,
      filter: (source) => !/[\\/](node_modules|dist|package-lock\.json|[^\\/]+\.tgz)$/.test(source),
    });
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    for (const [name, version] of Object.entries(versions)) {
      const section = name in manifest.devDependencies ? 'devDependencies' : 'dependencies';
      manifest[section][name] = version;
    }
    manifest.dependencies[PACKAGE.name] = `file:${tarball}`;
    writeFileSync(join(app, 'package.json'), JSON.stringify(manifest, null, 2));
    await must('npm', npmInstall, app);
    await must('npm', ['run', 'build'], app);
    return app;
  }

  /** Runs the example's one turn against the fake server and checks what each part did. */
  async function runTurn(app: string, nodeFlags: string[] = []) {
    const before = server.requests.length;
    server.enqueue(
      { toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] },
      { text: 'Order 42 has shipped. Your card 4111 1111 1111 1111 was not charged twice.' },
    );
    const result = await run(
      process.execPath,
      [...nodeFlags, 'dist/main.js'],
      app,
      childEnv({ LLM_BASE_URL: server.url, LLM_MODEL: 'fake-model' }),
      60_000, // the example exits by itself once the turn has settled
    );
    const lines = result.stdout.split('\n');
    const settlement = lines.find((line) => line.startsWith('{"settled"'));
    expect({ code: result.code, stderr: result.stderr, settled: !!settlement }).toEqual({
      code: 0,
      stderr: '',
      settled: true,
    });
    // The hook redacted the card number of the final answer.
    expect(JSON.parse(settlement!)).toEqual({
      settled: 'turn',
      turnId: expect.any(String),
      outcome: 'replied',
      reply: 'Order 42 has shipped. Your card [redacted] was not charged twice.',
    });
    // The host's own SessionStore was used, the tool ran, the queue listener heard the follow-up.
    expect(lines).toEqual(
      expect.arrayContaining([
        '[session-store] new session chat-1',
        '[tool] order_status 42 for alice',
        '[queue] chat-1: 1 waiting',
        '[queue] chat-1: 0 waiting',
        '[prompt] policy for chat-1',
        expect.stringMatching(/^\[hook\] redacted a card number in /),
      ]),
    );
    // What the model saw: the contribution in the system prompt, both inputs, the tool result.
    const [first, second] = server.requests.slice(before);
    expect(first.messages.slice(0, 4)).toEqual([
      { role: 'system', content: 'You are the support assistant of Example Ltd.' },
      { role: 'system', content: 'Refund policy of Example Ltd: 30 days, no questions asked.' },
      { role: 'user', content: 'Where is order 42?' },
      { role: 'user', content: 'It was a gift.' },
    ]);
    expect(first.tools.map((t: any) => t.function.name)).toEqual(['order_status']);
    expect(second.messages.at(-1)).toEqual({
      role: 'tool',
      tool_call_id: expect.any(String),
      content: JSON.stringify({ orderId: '42', status: 'shipped', carrier: 'DHL' }),
    });
  }

  /**
   * One turn in distributed mode from the installed package (`DISTRIBUTED_HOST` in the host's
   * folder): `@nestjs/bullmq`'s `BullModule` and `@Processor` of the host's line, the stores on
   * a PostgreSQL schema of its own, a Redis prefix of its own.
   */
  async function runDistributedTurn(app: string, nodeFlags: string[]) {
    const db = await tempPgSchema();
    const prefix = testPrefix();
    try {
      server.enqueue({ text: 'Answered by a distributed instance.' });
      writeFileSync(join(app, 'distributed-turn.cjs'), DISTRIBUTED_HOST);
      const result = await run(
        process.execPath,
        [...nodeFlags, 'distributed-turn.cjs'],
        app,
        childEnv({ LLM_BASE_URL: server.url, DB_URL: db.url, REDIS_URL, PREFIX: prefix }),
        60_000,
      );
      const settlement = result.stdout.split('\n').find((line) => line.startsWith('{"settled"'));
      expect({ code: result.code, stderr: result.stderr, settled: !!settlement }).toEqual({
        code: 0,
        stderr: '',
        settled: true,
      });
      expect(JSON.parse(settlement!)).toMatchObject({
        settled: 'turn',
        outcome: 'replied',
        reply: 'Answered by a distributed instance.',
      });
      // The input went through a wake job: the processor of the host's @nestjs/bullmq ran it.
      expect(result.stdout).toContain('[bullmq] @nestjs/bullmq 12.');
    } finally {
      await deletePrefix(prefix);
      await db.drop();
    }
  }

  /**
   * The host's installed tree: one copy of Nest's DI, and nothing of the server that the host
   * did not ask for itself, anywhere.
   */
  function expectHostTree(app: string, nestMajor: number) {
    const copies = installedPackages(join(app, 'node_modules'));
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    const asked = new Set(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies }));
    const majors = (name: string) => (copies.get(name) ?? []).map((v) => Number(v.split('.')[0]));
    for (const name of ['@nestjs/common', '@nestjs/core']) {
      expect({ name, majors: majors(name) }).toEqual({ name, majors: [nestMajor] });
    }
    for (const name of ['@nestjs/event-emitter', 'reflect-metadata', 'rxjs', PACKAGE.name]) {
      expect({ name, copies: copies.get(name)?.length }).toEqual({ name, copies: 1 });
    }
    for (const name of SERVER_ONLY.filter((n) => !asked.has(n))) {
      expect({ name, installed: copies.get(name) }).toEqual({ name, installed: undefined });
    }
    const neverAsked = ['better-sqlite3', 'pg', '@anthropic-ai/sdk', '@opentelemetry/sdk-node'];
    expect(SERVER_ONLY.filter((n) => !asked.has(n))).toEqual(
      neverAsked.filter((n) => !asked.has(n)),
    );
  }

  /**
   * `nest-agent-orchestrator/testing` from the installed package: `require` resolves it through
   * `exports`, it loads no Nest and not the main entry, its fake server answers the real
   * client's wire format, and TypeScript finds its types (nodenext through `exports`, the older
   * `node` resolution through `typesVersions`).
   */
  async function expectTestingEntry(app: string) {
    const probe = await run(
      process.execPath,
      [
        '-e',
        `const testing = require(${JSON.stringify(`${PACKAGE.name}/testing`)});
        const loaded = Object.keys(require.cache).filter((f) => !f.includes('/dist/testing/'));
        (async () => {
          const server = await testing.FakeOpenAiServer.start();
          server.enqueue({ text: 'Hello from the fake' });
          const res = await fetch(server.url + '/chat/completions', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'Hi' }] }),
          });
          const body = await res.json();
          await server.close();
          console.log(JSON.stringify({
            exports: Object.keys(testing).sort(),
            loaded,
            reply: body.choices[0].message.content,
            provider: new testing.ScriptedProvider().id,
          }));
        })();`,
      ],
      app,
    );
    expect(probe.stderr).toBe('');
    const seen = JSON.parse(probe.stdout) as {
      exports: string[];
      loaded: string[];
      reply: string;
      provider: string;
    };
    expect(seen.exports).toEqual(
      expect.arrayContaining([
        'FakeOpenAiServer',
        'ScriptedCall',
        'ScriptedHttpServer',
        'ScriptedProvider',
      ]),
    );
    expect(seen).toMatchObject({ loaded: [], reply: 'Hello from the fake', provider: 'scripted' });

    const source = [
      `import { FakeOpenAiServer, ScriptedProvider, type FakeScript } from '${PACKAGE.name}/testing';`,
      `const script: FakeScript = { toolCalls: [{ name: 'order_status', arguments: { orderId: '42' } }] };`,
      'export async function probe(): Promise<string> {',
      '  const server = await FakeOpenAiServer.start();',
      '  server.enqueue(script, { text: "done" });',
      '  await server.close();',
      '  return server.url + new ScriptedProvider().id;',
      '}',
      '',
    ].join('\n');
    writeFileSync(join(app, 'testing-probe.ts'), source);
    const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
    const common = ['--noEmit', '--strict', '--skipLibCheck', '--types', 'node'];
    for (const resolution of [
      ['--module', 'nodenext', '--moduleResolution', 'nodenext'],
      ['--module', 'commonjs', '--moduleResolution', 'node'],
    ]) {
      const typecheck = await run(
        process.execPath,
        [tsc, ...common, ...resolution, 'testing-probe.ts'],
        app,
      );
      expect({ resolution, code: typecheck.code, out: typecheck.stdout }).toEqual({
        resolution,
        code: 0,
        out: '',
      });
    }
  }

  it('the tarball holds the compiled library, the API entry with the dashboard, the testing entry, no tests, no server', () => {
    expect(packed).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/testing/index.js',
        'dist/testing/index.d.ts',
        'dist/api/public-api.js',
        'dist/api/public-api.d.ts',
        'dist/api/dashboard/index.html',
        'dist/api/dashboard/dashboard.js',
        'dist/api/dashboard/dashboard.css',
        'dist/api/dashboard/favicon.svg',
      ]),
    );
    const tests = /\.spec\.|\.tsbuildinfo$|\.ts$(?<!\.d\.ts)/;
    expect(packed.filter((f) => tests.test(f))).toEqual([]);
    expect(packed.filter((f) => /^dist\/(main|app)\.|^dist\/server\//.test(f))).toEqual([]);
    expect(packed.filter((f) => !f.startsWith('dist/')).sort()).toEqual([
      'CHANGELOG.md',
      'README.md',
      'package.json',
    ]);
  });

  it('every packed .js that names a source map ships it, with the sources inside it', () => {
    const scripts = packed.filter((f) => f.endsWith('.js'));
    expect(scripts.length).toBeGreaterThan(20);
    const stage = join(work, 'stage');
    for (const script of scripts) {
      const text = readFileSync(join(stage, script), 'utf8');
      const named = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(text)?.[1];
      if (!named) continue;
      const map = join(dirname(script), named);
      expect(packed).toContain(map);
      const parsed = JSON.parse(readFileSync(join(stage, map), 'utf8')) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      expect(parsed.sourcesContent?.length).toBe(parsed.sources.length);
      expect(parsed.sourcesContent?.every((c) => typeof c === 'string' && c.length > 0)).toBe(true);
    }
  });

  it('NestJS 11: installs, builds and answers a turn; optional peers fail with one line', async () => {
    const app = await installExample('host-nest11');
    expectHostTree(app, 11);
    await runTurn(app);

    // better-sqlite3, pg and @anthropic-ai/sdk are optional peers, absent here: loaded lazily.
    const probe = await run(
      process.execPath,
      [
        '-e',
        `const lib = require(${JSON.stringify(PACKAGE.name)});
        const line = (e) => console.log(e.message.split('\\n').length + ' ' + e.message);
        try { new lib.AnthropicProvider({}); } catch (e) { line(e); }
        lib.createSqlStores('file.sqlite').catch(line);
        lib.createSqlStores('postgres://localhost/agent').catch(line);`,
      ],
      app,
    );
    expect(probe.stderr).toBe('');
    const lines = probe.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^1 .*npm install @anthropic-ai\/sdk/),
        expect.stringMatching(
          /^1 .*"better-sqlite3" is not installed: npm install better-sqlite3$/,
        ),
        expect.stringMatching(/^1 .*"pg" is not installed: npm install pg$/),
      ]),
    );

    await expectTestingEntry(app);

    // The example's own jest e2e test: the API entry embedded under /api/agent, driven over
    // REST and Socket.IO, the model the testing entry's fake server.
    const tested = await run('npm', ['test', '--', '--ci', '--json'], app, childEnv(), 180_000);
    const report = JSON.parse(tested.stdout.slice(tested.stdout.indexOf('{'))) as {
      success: boolean;
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
    };
    expect({
      code: tested.code,
      success: report.success,
      failed: report.numFailedTests,
      skipped: report.numPendingTests,
      out: report.success ? '' : tested.stderr,
    }).toEqual({ code: 0, success: true, failed: 0, skipped: 0, out: '' });
    expect(report.numPassedTests).toBe(7);
  });

  it('NestJS 12: the same example on the ESM packages, loaded through require(esm)', async () => {
    const app = await installExample('host-nest12', {
      '@nestjs/common': '^12.0.0',
      '@nestjs/core': '^12.0.0',
      '@nestjs/event-emitter': '^12.0.0',
      '@nestjs/config': '^12.0.0',
      '@nestjs/platform-express': '^12.0.0',
      '@nestjs/platform-socket.io': '^12.0.0',
      '@nestjs/swagger': '^12.0.0',
      '@nestjs/terminus': '^12.0.0',
      '@nestjs/websockets': '^12.0.0',
      '@nestjs/testing': '^12.0.0',
      // Distributed mode's optional peers, on the NestJS 12 line of @nestjs/bullmq.
      '@nestjs/bullmq': '^12.0.0',
      bullmq: PEERS.bullmq,
      ioredis: PEERS.ioredis,
      pg: PEERS.pg,
    });
    expectHostTree(app, 12);
    await runTurn(app, requireEsmFlags);
    nest12App = app;
  });

  describeRedis('NestJS 12 with Redis', () => {
    describePg('and PostgreSQL', () => {
      it('NestJS 12: distributed mode runs an input through a wake job with @nestjs/bullmq 12', async () => {
        if (!nest12App)
          throw new Error('the NestJS 12 host was not installed (see the test before)');
        await runDistributedTurn(nest12App, requireEsmFlags);
      });
    });
  });
});
