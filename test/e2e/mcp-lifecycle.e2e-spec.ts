import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServers, ToolRegistry } from '../../src';
import { AgentHarness } from '../support/agent-harness';
import { ApiApp } from '../support/api-app';
import { freePort } from '../support/free-port';
import { callContext, MCP_FIXTURE, whenState } from '../support/mcp';
import { startHttpServer, type HttpFixture } from '../fixtures/mcp/fixture-server';

// Child processes start slowly on a loaded machine (each loads the SDK); backoff adds seconds.
jest.setTimeout(30_000);

/** Whether a process of that id runs. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * MCP servers over time (issue 20): a server that dies is connected again with backoff while
 * its tools stay registered and answer with a clear error; start-up never waits past the
 * connect timeout; `/health` lists every server; shutdown ends the child processes.
 */
describe('MCP servers: dying, coming back, start-up, /health, shutdown', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-life-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stdio: the killed process is restarted; meanwhile its tools say the server is unavailable', async () => {
    const gate = join(dir, 'gate');
    const h = await AgentHarness.start({
      agent: {
        mcpServers: {
          local: {
            command: process.execPath,
            args: [MCP_FIXTURE],
            env: { MCP_FIXTURE_GATE: gate },
          },
        },
      },
    });
    const tools = h.app.get(ToolRegistry);
    const mcp = h.app.get(McpServers);
    try {
      const pid = Number((await tools.execute('local__pid', {}, callContext())).content);
      expect(alive(pid)).toBe(true);
      writeFileSync(gate, 'closed');
      process.kill(pid, 'SIGKILL');
      const lost = await whenState(mcp, 'local', 'reconnecting');
      expect(lost).toMatchObject({ tools: 6, lastError: expect.any(String) });
      expect(tools.has('local__echo')).toBe(true);
      const meanwhile = await tools.execute('local__echo', { text: 'x' }, callContext());
      expect(meanwhile.ok).toBe(false);
      expect(JSON.parse(meanwhile.content).error).toMatch(
        /^Tool "local__echo" failed: MCP server "local" is unavailable \(reconnecting\)/,
      );
      unlinkSync(gate);
      await whenState(mcp, 'local', 'ready');
      const again = Number((await tools.execute('local__pid', {}, callContext())).content);
      expect(again).not.toBe(pid);
      expect(await tools.execute('local__echo', { text: 'y' }, callContext())).toEqual({
        ok: true,
        content: 'echo: y',
      });
    } finally {
      await h.close();
    }
  });

  it('HTTP: a server closed and reopened on the same port is reconnected', async () => {
    let http: HttpFixture = await startHttpServer();
    const port = http.port;
    const h = await AgentHarness.start({ agent: { mcpServers: { web: { url: http.url } } } });
    const tools = h.app.get(ToolRegistry);
    const mcp = h.app.get(McpServers);
    try {
      await http.close();
      const failed = await tools.execute('web__echo', { text: 'x' }, callContext());
      expect(failed.ok).toBe(false);
      expect(JSON.parse(failed.content).error).toContain('MCP server "web" is unavailable');
      await whenState(mcp, 'web', 'reconnecting');
      expect(tools.has('web__echo')).toBe(true);
      http = await startHttpServer(port);
      await whenState(mcp, 'web', 'ready');
      expect(await tools.execute('web__echo', { text: 'back' }, callContext())).toEqual({
        ok: true,
        content: 'echo: back',
      });
    } finally {
      await h.close();
      await http.close();
    }
  });

  it('start-up with an unreachable and a mute server does not hang; both retried in the background', async () => {
    const closedPort = await freePort();
    let late: HttpFixture | undefined;
    const started = performance.now();
    const h = await AgentHarness.start({
      agent: {
        mcpConnectTimeoutMs: 800,
        mcpServers: {
          gone: { url: `http://127.0.0.1:${closedPort}/mcp` },
          mute: { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] },
        },
      },
    });
    try {
      expect(performance.now() - started).toBeLessThan(5000);
      const status = h.app.get(McpServers).status();
      expect(status).toEqual([
        { name: 'gone', state: 'failed', tools: 0, lastError: expect.any(String) },
        { name: 'mute', state: 'failed', tools: 0, lastError: 'no answer within 800 ms' },
      ]);
      // The background retries find the server once it is there.
      late = await startHttpServer(closedPort);
      await whenState(h.app.get(McpServers), 'gone', 'ready');
      expect(h.app.get(ToolRegistry).has('gone__echo')).toBe(true);
    } finally {
      await h.close();
      await late?.close();
    }
  });

  it('shutdown closes the clients and ends the stdio child process', async () => {
    const h = await AgentHarness.start({
      agent: { mcpServers: { local: { command: process.execPath, args: [MCP_FIXTURE] } } },
    });
    const tools = h.app.get(ToolRegistry);
    const pid = Number((await tools.execute('local__pid', {}, callContext())).content);
    expect(alive(pid)).toBe(true);
    await h.close();
    expect(alive(pid)).toBe(false);
    expect(tools.has('local__echo')).toBe(false);
  });

  it('/health lists each server of AGENT_MCP_CONFIG with state, tool count and last error; stays up', async () => {
    const http = await startHttpServer();
    const config = join(dir, 'mcp.json');
    const gone = `http://127.0.0.1:${await freePort()}/mcp`;
    writeFileSync(
      config,
      JSON.stringify({ mcpServers: { web: { url: http.url }, gone: { url: gone } } }),
    );
    const a = await ApiApp.start({ env: { AGENT_MCP_CONFIG: config } });
    try {
      const res = await a.http().get('/health');
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('ok');
      expect(res.body.info.mcp).toEqual({
        status: 'up',
        servers: [
          { name: 'web', state: 'ready', tools: 6 },
          { name: 'gone', state: 'failed', tools: 0, lastError: expect.any(String) },
        ],
      });
      // The web server goes away: a call finds out, /health says so and stays up.
      await http.close();
      await a.app.get(ToolRegistry).execute('web__echo', { text: 'x' }, callContext());
      await whenState(a.app.get(McpServers), 'web', 'reconnecting');
      const later = await a.http().get('/health');
      expect(later.status).toBe(200);
      expect(later.body.info.mcp.servers[0]).toEqual({
        name: 'web',
        state: 'reconnecting',
        tools: 6,
        lastError: expect.any(String),
      });
    } finally {
      await a.close();
      await http.close();
    }
  });
});
