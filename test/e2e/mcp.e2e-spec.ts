import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { McpServers, ToolRegistry, type ApprovalEvent } from '../../src';
import { AgentHarness } from '../support/agent-harness';
import { callContext, MCP_FIXTURE, whenLine, whenMcp } from '../support/mcp';
import { startHttpServer, type HttpFixture } from '../fixtures/mcp/fixture-server';

// Child processes start slowly on a loaded machine (each loads the SDK); backoff adds seconds.
jest.setTimeout(30_000);

/**
 * MCP tool servers (issue 20) through the library: the fixture server of the SDK's `McpServer`
 * as a child process (`local`, stdio) and over Streamable HTTP (`web`), both in one agent.
 */
describe('MCP tool servers (stdio and Streamable HTTP)', () => {
  let h: AgentHarness;
  let http: HttpFixture;
  let tools: ToolRegistry;
  let mcp: McpServers;
  let dir: string;
  let log: string;
  const httpEvents: { name: string; detail: string }[] = [];
  const httpListeners = new Set<() => void>();

  /** Resolves with the detail of the first HTTP fixture event of `name` after `from`. */
  const httpEvent = (name: string, from = 0) =>
    new Promise<string>((resolve) => {
      const check = () => {
        const hit = httpEvents.slice(from).find((e) => e.name === name);
        if (!hit) return;
        httpListeners.delete(check);
        resolve(hit.detail);
      };
      httpListeners.add(check);
      check();
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-e2e-'));
    log = join(dir, 'events.log');
    writeFileSync(log, '');
    http = await startHttpServer(0, (name, detail) => {
      httpEvents.push({ name, detail });
      for (const listener of [...httpListeners]) listener();
    });
    h = await AgentHarness.start({
      agent: {
        toolTimeoutMs: 1500,
        modelCapabilities: { 'test-model': { vision: true } },
        mcpServers: {
          local: { command: process.execPath, args: [MCP_FIXTURE], env: { MCP_FIXTURE_LOG: log } },
          web: { url: http.url, headers: { 'x-test': '1' }, needsApproval: ['slow'] },
        },
      },
    });
    tools = h.app.get(ToolRegistry);
    mcp = h.app.get(McpServers);
  });

  afterAll(async () => {
    await h?.close();
    await http?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('start-up waits for both servers: ready, their tools registered as <server>__<tool>', () => {
    expect(mcp.status()).toEqual([
      { name: 'local', state: 'ready', tools: 6 },
      { name: 'web', state: 'ready', tools: 6 },
    ]);
    const names = tools.definitions().map((d) => d.name);
    for (const server of ['local', 'web']) {
      for (const tool of ['echo', 'slow', 'picture', 'fail', 'pid', 'add_tool']) {
        expect(names).toContain(`${server}__${tool}`);
      }
    }
    const echo = tools.definitions().find((d) => d.name === 'local__echo')!;
    expect(echo.description).toBe('Answers with its text');
    expect(echo.parameters).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
    });
  });

  it('a model call of an MCP tool runs in a real turn: the result reaches the model and history', async () => {
    h.server.enqueue(
      { toolCalls: [{ name: 'local__echo', arguments: { text: 'hi' } }] },
      { toolCalls: [{ name: 'web__echo', arguments: { text: 'there' } }] },
      { text: 'done' },
    );
    const settled = await h.agent.handleMessage({ sessionId: 'call', content: 'go' });
    expect(settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    const results = (await h.stored('call')).filter((m) => m.role === 'tool');
    expect(results.map((m) => m.content)).toEqual(['echo: hi', 'echo: there']);
    const ended = h.of('tool:execute').filter((e) => e.sessionId === 'call' && e.phase === 'end');
    expect(ended.map(({ name, ok, result }) => ({ name, ok, result }))).toEqual([
      { name: 'local__echo', ok: true, result: 'echo: hi' },
      { name: 'web__echo', ok: true, result: 'echo: there' },
    ]);
    // The model read the result in its next call.
    const lastMessages = h.server.requests.map((body) => body.messages.at(-1));
    expect(lastMessages).toContainEqual(
      expect.objectContaining({ role: 'tool', content: 'echo: hi' }),
    );
  });

  it('an image of an MCP result reaches a model that accepts images, after the tool results', async () => {
    h.server.enqueue({ toolCalls: [{ name: 'web__picture', arguments: {} }] }, { text: 'a dot' });
    await h.agent.handleMessage({ sessionId: 'picture', content: 'show me' });
    const after = h.server.requests.find((body) =>
      body.messages.some((m: any) => m.role === 'tool' && m.content.startsWith('a red dot')),
    );
    const [tool, images] = after.messages.slice(-2);
    expect(tool.content).toMatch(/\[image image\/png, \d+ bytes: shown after the tool results\]/);
    expect(images).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: '[Images returned by the tool results above: web__picture]' },
        {
          type: 'image_url',
          image_url: { url: expect.stringMatching(/^data:image\/png;base64,/) },
        },
      ],
    });
    // History keeps the text only.
    const stored = (await h.stored('picture')).map((m) => m.role);
    expect(stored).toEqual(['user', 'assistant', 'tool', 'assistant']);
  });

  it('arguments are checked against the server schema before the call', async () => {
    const result = await tools.execute('local__echo', { text: 5 }, callContext());
    expect(result.ok).toBe(false);
    expect(result.content).toContain('Invalid arguments for \\"local__echo\\"');
  });

  it('results: text as text, an image as a note (and an image when the model accepts images), a resource as its text; isError fails', async () => {
    const blind = await tools.execute('web__picture', {}, callContext({ acceptsImages: false }));
    expect(blind.ok).toBe(true);
    expect(blind.images).toBeUndefined();
    const [text, image, resource] = blind.content.split('\n\n');
    expect(text).toBe('a red dot');
    expect(image).toMatch(
      /^\[image image\/png, \d+ bytes: not shown, this model does not accept images\]$/,
    );
    expect(resource).toBe('the notes');
    const seeing = await tools.execute('web__picture', {}, callContext({ acceptsImages: true }));
    expect(seeing.content.split('\n\n')[1]).toMatch(/: shown after the tool results\]$/);
    expect(seeing.images).toEqual([expect.stringMatching(/^data:image\/png;base64,iVBOR/)]);
    const failed = await tools.execute('local__fail', {}, callContext());
    expect(failed).toEqual({
      ok: false,
      content: JSON.stringify({ error: 'Tool "local__fail" failed: no luck today' }),
    });
  });

  /** The next `agent:approval` request of `sessionId`. */
  const approvalOf = (sessionId: string) =>
    new Promise<ApprovalEvent>((resolve) => {
      const events = h.app.get(EventEmitter2);
      const on = (e: ApprovalEvent) => {
        if (e.sessionId !== sessionId || e.phase !== 'requested') return;
        events.off('agent:approval', on);
        resolve(e);
      };
      events.on('agent:approval', on);
    });

  it('needsApproval from the server entry (a list of its tools): the call waits, and a denied one never reaches the server', async () => {
    const spec = (name: string) => (tools as any).tools.get(name).spec;
    expect(spec('web__slow').needsApproval).toBe(true);
    expect(spec('web__echo').needsApproval).toBe(false);
    expect(spec('local__slow').needsApproval).toBe(false);

    const from = httpEvents.length;
    h.server.enqueue(
      { toolCalls: [{ name: 'web__slow', arguments: { ms: 10 } }] },
      { text: 'not run' },
    );
    const requested = approvalOf('deny-web');
    const settled = h.agent.handleMessage({ sessionId: 'deny-web', content: 'go' });
    const { callId, name, args } = await requested;
    expect({ name, args }).toEqual({ name: 'web__slow', args: { ms: 10 } });
    const decided = { approved: false, reason: 'not now', by: { platform: 'api', userId: 'ops' } };
    expect(await h.agent.approve('deny-web', callId, decided)).toBe(true);
    expect(await settled).toMatchObject({ settled: 'turn', outcome: 'replied' });
    const result = (await h.stored('deny-web')).find((m) => m.role === 'tool')!;
    expect(result.content).toContain('denied by ops');
    expect(result.metadata.approval).toMatchObject({ approved: false, by: { userId: 'ops' } });
    expect(httpEvents.slice(from).map((e) => e.name)).not.toContain('slow-start');
  });

  it('notifications/tools/list_changed: a tool added on the server is registered (stdio)', async () => {
    expect(tools.has('local__late')).toBe(false);
    const added = await tools.execute('local__add_tool', {}, callContext());
    expect(added).toEqual({ ok: true, content: 'added' });
    await whenMcp(mcp, () => (tools.has('local__late') ? true : undefined));
    expect(await tools.execute('local__late', { n: 2 }, callContext())).toEqual({
      ok: true,
      content: 'late 2',
    });
    expect(mcp.status().find((s) => s.name === 'local')!.tools).toBe(7);
  });

  it('notifications/tools/list_changed: a tool added on the server is registered (HTTP)', async () => {
    expect(tools.has('web__late')).toBe(false);
    http.addLateTool();
    await whenMcp(mcp, () => (tools.has('web__late') ? true : undefined));
    const def = tools.definitions().find((d) => d.name === 'web__late')!;
    expect(def.parameters).toMatchObject({ properties: { n: { type: 'number' } } });
  });

  it("a turn's abort cancels the running MCP call on the server (HTTP)", async () => {
    const from = httpEvents.length;
    h.server.enqueue({ toolCalls: [{ name: 'web__slow', arguments: { ms: 60_000 } }] });
    const requested = approvalOf('abort-web');
    const settled = h.agent.handleMessage({ sessionId: 'abort-web', content: 'go' });
    // web__slow asks first (its server entry's needsApproval): approved, it runs.
    const { callId } = await requested;
    expect(await h.agent.approve('abort-web', callId, { approved: true })).toBe(true);
    const started = await httpEvent('slow-start', from);
    expect(h.agent.abort('abort-web')).toBe(true);
    expect(await httpEvent('slow-cancelled', from)).toBe(started);
    expect(await settled).toMatchObject({ settled: 'turn', outcome: 'aborted' });
  });

  it("a turn's abort cancels the running MCP call on the server (stdio)", async () => {
    h.server.enqueue({ toolCalls: [{ name: 'local__slow', arguments: { ms: 60_000 } }] });
    const settled = h.agent.handleMessage({ sessionId: 'abort-local', content: 'go' });
    const started = (await whenLine(log, 'slow-start')).split(' ')[1];
    expect(h.agent.abort('abort-local')).toBe(true);
    expect(await whenLine(log, 'slow-cancelled')).toBe(`slow-cancelled ${started}`);
    expect(await settled).toMatchObject({ settled: 'turn', outcome: 'aborted' });
  });

  it("the tool's timeout applies: a timeout result, and the server sees the call cancelled", async () => {
    const from = httpEvents.length;
    const result = await tools.execute('web__slow', { ms: 60_000 }, callContext());
    expect(result).toEqual({
      ok: false,
      content: JSON.stringify({ error: 'Tool "web__slow" timed out after 1500 ms' }),
    });
    const started = await httpEvent('slow-start', from);
    expect(await httpEvent('slow-cancelled', from)).toBe(started);
  });
});
