import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveAgentOptions } from '../../../../src/agent/agent.options.validate';
import { mcpServersProblem } from '../../../../src/agent/mcp/mcp.config';
import { ConfigError, loadAppConfig } from '../../../../src/app.config';
import { AgentOptionsError } from '../../../../src/contracts';

describe('mcpServers option', () => {
  it('accepts stdio and HTTP entries with needsApproval true or a list', () => {
    const mcpServers = {
      files: { command: 'npx', args: ['-y', 'server-files'], env: { ROOT: '/tmp' } },
      search: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' } },
      shell: { command: 'shell-mcp', needsApproval: true },
      web: { url: 'http://127.0.0.1:9/mcp', needsApproval: ['fetch'] },
    };
    expect(mcpServersProblem(mcpServers)).toBeUndefined();
    expect(resolveAgentOptions({ mcpServers }).mcpServers).toBe(mcpServers);
    expect(resolveAgentOptions({}).mcpServers).toEqual({});
    expect(resolveAgentOptions({}).mcpConnectTimeoutMs).toBe(10_000);
  });

  it.each([
    [[], 'AgentModule option mcpServers must be an object of servers by name'],
    [{ 'a.b': { command: 'x' } }, 'server name "a.b" must be 1-32 letters, digits, _ or -'],
    [{ a: 'x' }, 'mcpServers.a must be an object with "command" or "url"'],
    [{ a: {} }, 'mcpServers.a must have either "command" or "url"'],
    [{ a: { command: 'x', url: 'http://h' } }, 'mcpServers.a must have either "command" or "url"'],
    [{ a: { command: '' } }, 'mcpServers.a.command must be a non-empty string'],
    [{ a: { command: 'x', args: 'y' } }, 'mcpServers.a.args must be a list of strings'],
    [{ a: { command: 'x', env: { N: 1 } } }, 'mcpServers.a.env must map names to strings'],
    [{ a: { url: 'nope' } }, 'mcpServers.a.url must be a URL, got "nope"'],
    [{ a: { url: 'ftp://h/x' } }, 'mcpServers.a.url must use http: or https:, got "ftp:"'],
    [{ a: { url: 'http://h', headers: [] } }, 'mcpServers.a.headers must map names to strings'],
    [
      { a: { url: 'http://h', needsApproval: 'yes' } },
      'mcpServers.a.needsApproval must be true, false or a list of tool names',
    ],
  ])('refuses %j: "%s"', (mcpServers, message) => {
    expect(() => resolveAgentOptions({ mcpServers: mcpServers as any })).toThrow(AgentOptionsError);
    expect(() => resolveAgentOptions({ mcpServers: mcpServers as any })).toThrow(message);
  });

  it('mcpConnectTimeoutMs must be a positive integer', () => {
    expect(() => resolveAgentOptions({ mcpConnectTimeoutMs: 0 })).toThrow(
      'AgentModule option "mcpConnectTimeoutMs" must be an integer >= 1, got 0',
    );
  });
});

describe('AGENT_MCP_CONFIG', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'mcp-config-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const refusal = (path: string) => {
    try {
      loadAppConfig({ AGENT_MCP_CONFIG: path });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    throw new Error('accepted');
  };

  it('unset: no MCP servers; set: the mcpServers of the file (other keys ignored)', () => {
    expect(loadAppConfig({}).mcpServers).toBeUndefined();
    const servers = { files: { command: 'node', args: ['server.js'] } };
    const path = file('ok.json', JSON.stringify({ mcpServers: servers, globalShortcut: 'x' }));
    expect(loadAppConfig({ AGENT_MCP_CONFIG: path }).mcpServers).toEqual(servers);
  });

  it('a missing, non-JSON or invalid file stops start-up with one line naming AGENT_MCP_CONFIG', () => {
    const missing = join(dir, 'missing.json');
    expect(refusal(missing)).toMatch(/^AGENT_MCP_CONFIG: cannot read ".*missing\.json": ENOENT/);
    expect(refusal(file('bad.json', '{ nope'))).toMatch(
      /^AGENT_MCP_CONFIG: ".*bad\.json" is not JSON/,
    );
    expect(refusal(file('none.json', '{}'))).toMatch(/must be an object with "mcpServers"$/);
    const wrong = file('wrong.json', JSON.stringify({ mcpServers: { a: { url: 5 } } }));
    expect(refusal(wrong)).toMatch(
      /^AGENT_MCP_CONFIG: ".*wrong\.json": mcpServers\.a\.url must be a URL/,
    );
    for (const message of [refusal(missing), refusal(wrong)]) expect(message).not.toContain('\n');
  });
});
