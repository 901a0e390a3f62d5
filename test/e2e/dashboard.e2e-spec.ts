import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import type { Namespace } from 'socket.io';
import { AgentService, ToolRegistry } from '../../src/agent';
import { AgentGateway } from '../../src/api';
import { DASHBOARD_CSP } from '../../src/api/dashboard/dashboard.controller';
import {
  MessageArchive,
  type MessageArchive as MessageArchivePort,
  type NewMessage,
  type TokenUsageEvent,
} from '../../src/contracts';
import { ApiApp, TEST_TOKEN } from '../support/api-app';
import { TestBrowser, chromiumInstalled, missingChromiumMessage } from '../support/browser';

/**
 * Where the screenshot goes: the README's `docs/dashboard.png` when `UPDATE_SCREENSHOT=1`
 * (to refresh it on purpose), else a temporary file, so test runs leave the tree unchanged.
 */
const SCREENSHOT = process.env.UPDATE_SCREENSHOT
  ? resolve(__dirname, '..', '..', 'docs', 'dashboard.png')
  : join(tmpdir(), `agent-dashboard-${process.pid}.png`);
const TOKEN_KEY = 'agent-dashboard.token';

jest.setTimeout(60_000);

describe('dashboard page and assets over HTTP (GET /)', () => {
  let a: ApiApp;
  beforeAll(async () => {
    a = await ApiApp.start();
  });
  afterAll(() => a?.close());

  it('GET / is public HTML with a self-only CSP, and names its script and the socket client', async () => {
    const res = await a.http().get('/').expect(200);

    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toMatch(/^default-src 'self'/);
    expect(DASHBOARD_CSP).not.toMatch(/unsafe|https?:|\*/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.text).toContain('<script src="/dashboard/dashboard.js"');
    expect(res.text).toContain('<script src="/socket.io/socket.io.min.js"');
    // Nothing off the machine: every URL the page names is a path of this server.
    expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it.each([
    ['/dashboard/dashboard.js', 'text/javascript; charset=utf-8', 'io('],
    ['/dashboard/dashboard.css', 'text/css; charset=utf-8', '.usage-bar'],
    ['/dashboard/favicon.svg', 'image/svg+xml', '<svg'],
  ])('%s is served as %s', async (path, type, excerpt) => {
    const res = await a.http().get(path).buffer(true).expect(200);

    expect(res.headers['content-type']).toBe(type);
    expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP);
    expect(String(res.text ?? res.body)).toContain(excerpt);
  });

  it('the Socket.IO client is served by the server itself', async () => {
    const res = await a.http().get('/socket.io/socket.io.min.js').expect(200);

    expect(res.headers['content-type']).toMatch(/javascript/);
    expect(res.text.length).toBeGreaterThan(10_000);
  });

  it.each(['/dashboard/nope.js', '/dashboard/index.html', '/dashboard/..%2Fpackage.json'])(
    '%s: 404',
    async (path) => {
      await a.http().get(path).expect(404);
    },
  );
});

// Without the browser: skipped with a warning on a workstation, a failure on CI.
const browserAvailable = chromiumInstalled();
if (!browserAvailable && !process.env.CI) {
  process.stderr.write(`Skipping the dashboard browser tests. ${missingChromiumMessage()}\n`);
}
const describeBrowser = browserAvailable || process.env.CI ? describe : describe.skip;

describeBrowser('dashboard in a real browser (README: Socket.IO, Dashboard)', () => {
  let a: ApiApp;
  let browser: TestBrowser;
  /** Uncaught page errors and CSP refusals, per page; every test ends with none. */
  let problems: string[];
  /** URLs of the WebSockets each page opened. */
  const websockets = new WeakMap<Page, string[]>();

  beforeAll(async () => {
    if (!chromiumInstalled()) throw new Error(missingChromiumMessage());
    const [app, launched] = await Promise.all([ApiApp.start(), TestBrowser.launch()]);
    a = app;
    browser = launched;
  });
  afterAll(async () => {
    await browser?.close();
    await a?.close();
  });
  beforeEach(() => {
    problems = [];
  });
  afterEach(() => {
    expect(problems).toEqual([]);
  });

  /** A new tab on the dashboard, not yet past the token form. */
  async function open(): Promise<Page> {
    const page = await browser.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) {
        problems.push(`CSP: ${message.text()}`);
      }
    });
    websockets.set(page, []);
    page.on('websocket', (socket) => websockets.get(page)!.push(socket.url()));
    page.on('request', (request) => {
      if (!request.url().startsWith(a.url)) problems.push(`off-host request: ${request.url()}`);
    });
    await page.goto(`${a.url}/`);
    return page;
  }

  async function enterToken(page: Page, token: string): Promise<void> {
    await page.getByTestId('token-input').fill(token);
    await page.getByTestId('token-submit').click();
  }

  /** A tab with the admin token given and the live subscription acked. */
  async function openDashboard(): Promise<Page> {
    const page = await open();
    await enterToken(page, TEST_TOKEN);
    await page.locator('[data-testid="connection-status"][data-state="live"]').waitFor();
    return page;
  }

  /** Sends from the page's message box as the test user. */
  async function send(page: Page, sessionId: string, content: string): Promise<void> {
    await page.getByTestId('message-session').fill(sessionId);
    await page.getByTestId('message-input').fill(content);
    await page.getByTestId('message-send').click();
  }

  const turnOf = (page: Page, turnId: string): Locator =>
    page.locator(`[data-testid="turn"][data-turn-id="${turnId}"]`);

  const outcomeOf = (turn: Locator, outcome: string): Locator =>
    turn.locator(`[data-testid="turn-outcome"]`, { hasText: new RegExp(`^${outcome}$`) });

  /** Sends from the page and resolves once the model holds the call, with the turn id. */
  async function sendAndHold(page: Page, sessionId: string, content: string): Promise<string> {
    const called = a.nextModelCall();
    const started = a.nextEvent('agent:turn:start', (e) => e.sessionId === sessionId);
    await send(page, sessionId, content);
    await called;
    return (await started).turnId;
  }

  /** A data attribute of every element of a test id, in document order. */
  const attributesOf = (page: Page, testId: string, key: string) =>
    page.evaluate<string[]>(
      `[...document.querySelectorAll('[data-testid="${testId}"]')].map((n) => n.dataset.${key})`,
    );

  /** The token stored for the tab. */
  const storedToken = (page: Page) =>
    page.evaluate<string | null>(`sessionStorage.getItem(${JSON.stringify(TOKEN_KEY)})`);

  it('(a) a wrong token is refused: the page says so, shows no session data and keeps no token', async () => {
    const page = await open();
    await page.getByTestId('token-form').waitFor();

    await enterToken(page, `${TEST_TOKEN}-wrong`);

    const error = page.getByTestId('token-error');
    await error.filter({ hasText: /token refused/i }).waitFor();
    await page.locator('[data-testid="connection-status"][data-state="refused"]').waitFor();
    // Activity the page would show with the right token.
    await a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .send({ sessionId: 'dash-secret', content: 'not for wrong tokens' })
      .expect(200);
    expect(await page.getByTestId('dashboard').isHidden()).toBe(true);
    expect(await page.getByTestId('session-item').count()).toBe(0);
    expect(await page.content()).not.toContain('dash-secret');
    expect(await storedToken(page)).toBeNull();

    // Asked again: the right token connects, and is kept for the tab only.
    await enterToken(page, TEST_TOKEN);
    await page.locator('[data-testid="connection-status"][data-state="live"]').waitFor();
    expect(await storedToken(page)).toBe(TEST_TOKEN);
    expect(await page.getByTestId('token-panel').isHidden()).toBe(true);
  });

  it('(b) a message sent from the page: the streamed reply grows, then the outcome replied', async () => {
    const page = await openDashboard();
    const full = 'Streaming works: this reply arrives in four separate pieces.';
    const first = full.slice(0, Math.floor(full.length / 4));
    a.server.enqueue({ text: full, chunks: 4, hold: true });

    const turnId = await sendAndHold(page, 'dash-stream', 'Hello from the dashboard');

    const turn = turnOf(page, turnId);
    const content = turn.getByTestId('turn-content');
    await content.filter({ hasText: first }).waitFor();
    expect(await content.textContent()).toBe(first);
    expect(await turn.getByTestId('turn-outcome').textContent()).toBe('running');
    expect(
      await page
        .locator('[data-testid="session-item"][data-session-id="dash-stream"]')
        .getAttribute('data-state'),
    ).toBe('running');
    const request = a.server.requests.at(-1);
    expect(request.messages.at(-1)).toMatchObject({
      role: 'user',
      content: expect.stringContaining('Hello from the dashboard'),
    });

    a.server.release();

    await outcomeOf(turn, 'replied').waitFor();
    expect(await content.textContent()).toBe(full);
    await page
      .locator('[data-testid="session-item"][data-session-id="dash-stream"][data-state="idle"]')
      .waitFor();
    // The input, from the persisted history: sent as the test user.
    await turn.getByTestId('turn-inputs').filter({ hasText: 'Hello from the dashboard' }).waitFor();
    expect(await turn.getByTestId('turn-inputs').textContent()).toContain('dashboard');
    const history = await a.http().get('/agent/sessions/dash-stream/history').set(a.auth);
    expect(history.body.messages[0].metadata).toMatchObject({ userId: 'dashboard' });
    // The CSP lets the Socket.IO client upgrade to a WebSocket of the same origin.
    if (!websockets.get(page)!.length) await page.waitForEvent('websocket');
    expect(websockets.get(page)![0]).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/socket\.io\//);
  });

  it('(c) a sourced input waits with its source, and leaves the list when it enters its turn', async () => {
    const page = await openDashboard();
    const sessionId = 'dash-queue';
    a.server.enqueue({ text: 'first answer', hold: true }, { text: 'digest sent' });
    await sendAndHold(page, sessionId, 'first');

    await a
      .http()
      .post('/agent/messages')
      .set(a.auth)
      .send({ sessionId, content: 'nightly digest', source: 'scheduler' })
      .expect(202);

    const item = page.getByTestId('waiting-item');
    await item.filter({ hasText: 'nightly digest' }).waitFor();
    expect(await item.count()).toBe(1);
    expect(await item.getByTestId('waiting-source').textContent()).toBe('scheduler');
    expect(await item.getByTestId('waiting-content').textContent()).toBe('nightly digest');
    expect(await page.getByTestId('waiting-count').textContent()).toBe('1');
    const second = a.nextEvent('agent:turn:start', (e) => e.sessionId === sessionId);

    a.server.release();

    const { turnId } = await second;
    await item.first().waitFor({ state: 'detached' });
    expect(await page.getByTestId('waiting-count').textContent()).toBe('0');
    const turn = turnOf(page, turnId);
    await outcomeOf(turn, 'replied').waitFor();
    expect(await turn.getByTestId('turn-content').textContent()).toBe('digest sent');
    await turn.getByTestId('turn-inputs').filter({ hasText: 'nightly digest' }).waitFor();
    expect(await turn.getByTestId('turn-inputs').textContent()).toContain('scheduler');
  });

  it('(d) the stop button ends a slow turn: outcome aborted', async () => {
    const page = await openDashboard();
    a.server.enqueue({
      text: 'A slow answer that would take a very long time.',
      chunks: 5,
      hold: true,
    });
    const turnId = await sendAndHold(page, 'dash-stop', 'take your time');
    const turn = turnOf(page, turnId);
    await turn.getByTestId('turn-content').filter({ hasText: 'A slow' }).waitFor();
    const ended = a.nextEvent('agent:turn:end', (e) => e.turnId === turnId);

    await page.locator('[data-testid="stop-button"]:enabled').click();

    expect((await ended).outcome).toBe('aborted');
    await outcomeOf(turn, 'aborted').waitFor();
    await page
      .getByTestId('action-status')
      .filter({ hasText: /^stopped$/ })
      .waitFor();
    await page.locator('[data-testid="selected-session-state"][data-state="idle"]').waitFor();
    expect(await page.getByTestId('stop-button').isDisabled()).toBe(true);
    expect(a.server.heldCount).toBe(0);
  });

  it('a connection lost mid-turn: after the reconnect the page resumes the turn and shows everything once', async () => {
    const page = await openDashboard();
    // A tool call held, then a text held after its first chunk.
    a.server.enqueue(
      { text: 'Looking', toolCalls: [{ name: 'missing_tool', arguments: {} }], hold: true },
      { text: 'The answer comes in four chunks.', chunks: 4, hold: true },
    );
    const turnId = await sendAndHold(page, 'dash-resume', 'resume me');
    const turn = turnOf(page, turnId);
    const content = turn.getByTestId('turn-content');
    await content.filter({ hasText: 'Looking' }).waitFor();

    // The server side of the page's connection goes away (as when a network drops).
    // The gateway's namespace is private: read it as the test's own view of the gateway.
    const { namespace } = a.app.get<AgentGateway, { namespace: Namespace }>(AgentGateway);
    for (const socket of namespace.sockets.values()) socket.conn.close();
    await page.locator('[data-testid="connection-status"][data-state="offline"]').waitFor();
    // Missed meanwhile: the tool call's start and end, the first chunk of the answer.
    const secondCall = a.nextModelCall();
    a.server.release();
    await secondCall;
    await page.locator('[data-testid="connection-status"][data-state="live"]').waitFor();
    // One text block before the tool call, one after it.
    await content.filter({ hasText: 'The' }).waitFor();
    // Live again: the rest of the answer and the end.
    a.server.release();

    await outcomeOf(turn, 'replied').waitFor();
    expect(await content.allTextContents()).toEqual([
      'Looking',
      'The answer comes in four chunks.',
    ]);
    expect(await turn.getByTestId('tool-call').count()).toBe(1);
  });

  it('(d2) "Stop + drop queue" also drops the waiting inputs: they open no turn', async () => {
    const page = await openDashboard();
    const sessionId = 'dash-stop-drop';
    a.server.enqueue({ text: 'held for the drop', hold: true });
    const turnId = await sendAndHold(page, sessionId, 'first');
    await a
      .http()
      .post('/agent/messages')
      .set(a.auth)
      .send({ sessionId, content: 'queued report', source: 'scheduler' })
      .expect(202);
    await page.getByTestId('waiting-item').filter({ hasText: 'queued report' }).waitFor();
    const calls = a.server.requests.length;

    await page.getByTestId('stop-drop-button').click();

    await outcomeOf(turnOf(page, turnId), 'aborted').waitFor();
    await page.getByTestId('waiting-item').first().waitFor({ state: 'detached' });
    await page.getByTestId('action-status').filter({ hasText: 'dropped' }).waitFor();
    const queue = await a.http().get(`/agent/sessions/${sessionId}/queue`).set(a.auth);
    expect(queue.body.waiting).toEqual([]);
    expect(await page.getByTestId('turn').count()).toBe(1);
    expect(a.server.requests.length).toBe(calls);
  });

  it('(e) usage bars of the last call: one per parts row, labels, tokens, injectors, ratio', async () => {
    const page = await openDashboard();
    const sessionId = 'dash-usage';
    const usages: TokenUsageEvent[] = [];
    const record = (event: TokenUsageEvent) => {
      if (event.sessionId === sessionId) usages.push(event);
    };
    a.emitter.on('token:usage', record);
    try {
      const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === sessionId);
      a.server.enqueue({ text: 'counted', usage: { prompt_tokens: 1234, completion_tokens: 5 } });
      await send(page, sessionId, 'count my tokens');
      await ended;
    } finally {
      a.emitter.off('token:usage', record);
    }
    // The last call's (a snapshot, without turn id, never replaces it on the page).
    const usage = usages.filter((u) => u.turnId).at(-1)!;
    const labels = usage.parts.map((p) => p.label);
    expect(labels).toEqual(expect.arrayContaining(['Persona', 'History']));
    const fmt = (n: number) => n.toLocaleString('en-US');

    await page
      .getByTestId('usage-total')
      .filter({ hasText: `${fmt(usage.used)} / ${fmt(usage.contextWindow)} tokens` })
      .waitFor();

    expect(await page.getByTestId('usage-bar-label').allTextContents()).toEqual(labels);
    expect(await page.getByTestId('usage-bar-tokens').allTextContents()).toEqual(
      usage.parts.map((p) => fmt(p.tokens)),
    );
    const pct = (100 * usage.used) / usage.contextWindow;
    expect(await page.getByTestId('usage-ratio').textContent()).toBe(
      `${pct.toFixed(pct < 1 ? 2 : 1)}% of the context window`,
    );
    for (const part of usage.parts) {
      const title = await page
        .locator(`[data-testid="usage-bar"][data-label="${part.label}"]`)
        .getAttribute('title');
      expect(title).toContain(`${part.label}: ${fmt(part.tokens)} tokens`);
      for (const key of Object.keys(part.injectors ?? {})) expect(title).toContain(key);
      if (!Object.keys(part.injectors ?? {}).length) expect(title).toContain('no injector detail');
    }
  });

  it('model selector (assignModel) shows 204, 422 and 404; clear history asks first and holds', async () => {
    const page = await openDashboard();
    const sessionId = 'dash-controls';
    const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === sessionId);
    await send(page, sessionId, 'hi');
    await ended;
    const status = page.getByTestId('action-status');

    await page.getByTestId('model-input').fill('assigned-model');
    await page.getByTestId('model-submit').click();
    await status.filter({ hasText: 'model set to assigned-model' }).waitFor();

    await page.getByTestId('model-provider').fill('nope');
    await page.getByTestId('model-submit').click();
    await status.filter({ hasText: /model not assigned: 422/ }).waitFor();

    await page.getByTestId('watch-input').fill('dash-never-seen');
    await page.getByTestId('watch-submit').click();
    await page.getByTestId('selected-session-id').filter({ hasText: 'dash-never-seen' }).waitFor();
    await page.getByTestId('model-provider').fill('');
    await page.getByTestId('model-submit').click();
    await status.filter({ hasText: /model not assigned: 404/ }).waitFor();

    // Clear: dismissed, nothing happens; accepted, the session is held until it is done.
    await page.locator(`[data-testid="session-item"][data-session-id="${sessionId}"]`).click();
    let clears = 0;
    let letClearGo!: () => void;
    const gate = new Promise<void>((resolve) => (letClearGo = resolve));
    await page.route('**/agent/sessions/clear', async (route) => {
      clears++;
      await gate;
      await route.continue();
    });
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.getByTestId('clear-button').click();
    expect(clears).toBe(0);
    const dialog = new Promise<string>((resolve) =>
      page.once('dialog', (d) => {
        resolve(d.message());
        void d.accept();
      }),
    );

    await page.getByTestId('clear-button').click();

    expect(await dialog).toContain(sessionId);
    await page.locator('[data-testid="selected-session-state"][data-state="held"]').waitFor();
    await page.locator(`[data-testid="session-item"][data-state="held"]`).waitFor();
    letClearGo();
    await status.filter({ hasText: 'history cleared' }).waitFor();
    await page.locator('[data-testid="selected-session-state"][data-state="idle"]').waitFor();
    expect(clears).toBe(1);
    const history = await a.http().get(`/agent/sessions/${sessionId}/history`).set(a.auth);
    expect(history.body.messages).toEqual([]);
  });

  it('(g) "Stop all" asks first, then stops every running turn and names the sessions stopped', async () => {
    const page = await openDashboard();
    a.server.enqueue(
      { text: 'first slow answer', hold: true },
      { text: 'second slow answer', hold: true },
    );
    const first = await sendAndHold(page, 'dash-all-1', 'one');
    const second = await sendAndHold(page, 'dash-all-2', 'two');
    const status = page.getByTestId('stop-all-status');
    let requests = 0;
    await page.route('**/agent/sessions/abort', async (route) => {
      requests++;
      await route.continue();
    });

    // Dismissed: nothing is sent, nothing stops.
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.getByTestId('stop-all-button').click();
    expect(requests).toBe(0);
    expect(a.server.heldCount).toBe(2);

    const dialog = new Promise<string>((resolve) =>
      page.once('dialog', (d) => {
        resolve(d.message());
        void d.accept();
      }),
    );
    const ended = [first, second].map((turnId) =>
      a.nextEvent('agent:turn:end', (e) => e.turnId === turnId),
    );
    await page.getByTestId('stop-all-button').click();

    expect(await dialog).toContain('Stop every running turn');
    expect((await Promise.all(ended)).map((e) => e.outcome)).toEqual(['aborted', 'aborted']);
    await status.filter({ hasText: /^stopped 2: / }).waitFor();
    expect(await status.textContent()).toEqual(expect.stringContaining('dash-all-1'));
    expect(await status.textContent()).toEqual(expect.stringContaining('dash-all-2'));
    // The selected session (the last one sent to) shows its turn aborted; both are idle in the list.
    await outcomeOf(turnOf(page, second), 'aborted').waitFor();
    for (const id of ['dash-all-1', 'dash-all-2']) {
      await page
        .locator(`[data-testid="session-item"][data-session-id="${id}"][data-state="idle"]`)
        .waitFor();
    }
    expect(requests).toBe(1);

    // Nothing runs any more.
    page.once('dialog', (d) => void d.accept());
    await page.getByTestId('stop-all-button').click();
    await status.filter({ hasText: 'nothing was running' }).waitFor();
    expect(a.server.heldCount).toBe(0);
  });

  it('(h) a tool call awaiting approval shows its name, arguments and Approve / Deny; Approve runs it', async () => {
    const ran: unknown[] = [];
    const dispose = a.app.get(ToolRegistry).register({
      name: 'refund',
      description: 'Refunds an order',
      parameters: { type: 'object', properties: { orderId: { type: 'string' } } },
      needsApproval: true,
      handler: (args) => {
        ran.push(args);
        return { refunded: true };
      },
    });
    try {
      const page = await openDashboard();
      const sessionId = 'dash-approval';
      a.server.enqueue(
        { toolCalls: [{ name: 'refund', arguments: { orderId: 'A-7' } }] },
        { text: 'Refunded order A-7.' },
      );
      const requested = a.nextEvent('agent:approval', (e) => e.sessionId === sessionId);
      await send(page, sessionId, 'please refund A-7');
      const { turnId } = await requested;

      const item = page.getByTestId('approval-item');
      await item.waitFor();
      expect(await item.getByTestId('approval-name').textContent()).toBe('refund');
      expect(await item.getByTestId('approval-args').textContent()).toContain('"orderId": "A-7"');
      expect(await page.getByTestId('approval-count').textContent()).toBe('1');
      expect(await item.getByTestId('deny-button').isEnabled()).toBe(true);
      expect(ran).toEqual([]);
      const ended = a.nextEvent('agent:turn:end', (e) => e.turnId === turnId);

      await item.getByTestId('approve-button').click();

      expect((await ended).outcome).toBe('replied');
      expect(ran).toEqual([{ orderId: 'A-7' }]);
      await item.waitFor({ state: 'detached' });
      await outcomeOf(turnOf(page, turnId), 'replied').waitFor();
      expect(await page.getByTestId('approval-count').textContent()).toBe('0');
      const history = await a.http().get(`/agent/sessions/${sessionId}/history`).set(a.auth);
      const tool = history.body.messages.find((m: { role: string }) => m.role === 'tool');
      expect(tool.metadata.approval).toMatchObject({
        approved: true,
        by: { platform: 'admin', userId: 'admin' },
      });
    } finally {
      dispose();
      // A failure above must not leave the turn waiting or its scripts to the next test.
      a.server.discardScripts();
      await a.app.get(AgentService).abortAsync('dash-approval');
    }
  });

  it('(h2) a call that is already waiting when the page opens is listed; Deny tells the model', async () => {
    const dispose = a.app.get(ToolRegistry).register({
      name: 'wipe',
      description: 'Wipes a disk',
      parameters: { type: 'object', properties: { disk: { type: 'string' } } },
      needsApproval: true,
      handler: () => 'wiped',
    });
    try {
      const sessionId = 'dash-deny';
      a.server.enqueue(
        { toolCalls: [{ name: 'wipe', arguments: { disk: 'sda' } }] },
        { text: 'I did not wipe it.' },
      );
      const requested = a.nextEvent('agent:approval', (e) => e.sessionId === sessionId);
      const settled = a.postAndWait({ sessionId, content: 'wipe sda' });
      await requested;
      const page = await openDashboard();
      await page.getByTestId('watch-input').fill(sessionId);
      await page.getByTestId('watch-submit').click();

      const item = page.getByTestId('approval-item');
      await item.filter({ hasText: 'wipe' }).waitFor();
      await item.getByTestId('deny-button').click();

      expect((await settled).body).toMatchObject({ outcome: 'replied' });
      await item.waitFor({ state: 'detached' });
      const history = await a.http().get(`/agent/sessions/${sessionId}/history`).set(a.auth);
      const tool = history.body.messages.find((m: { role: string }) => m.role === 'tool');
      expect(tool.content).toBe('{"error":"The call to \\"wipe\\" was denied by admin"}');
    } finally {
      dispose();
      a.server.discardScripts();
      await a.app.get(AgentService).abortAsync('dash-deny');
    }
  });

  it('(f) screenshot for the README: a finished turn with a tool call, a running one, usage bars', async () => {
    const dispose = a.app.get(ToolRegistry).register({
      name: 'order_status',
      description: 'Looks up the status of an order',
      parameters: { type: 'object', properties: { orderId: { type: 'string' } } },
      handler: () => ({ status: 'shipped', carrier: 'DHL', eta: 'tomorrow' }),
    });
    try {
      const page = await openDashboard();
      // Another session, finished, for the list.
      a.server.enqueue({ text: 'Nightly check: all services are green.' });
      await a
        .http()
        .post('/agent/messages?wait=true')
        .set(a.auth)
        .send({ sessionId: 'ops:nightly', content: 'Run the nightly check', source: 'scheduler' })
        .expect(200);
      const sessionId = 'support:alice';
      a.server.enqueue(
        {
          toolCalls: [{ name: 'order_status', arguments: { orderId: 'A-1042' } }],
          usage: { prompt_tokens: 96, completion_tokens: 21 },
        },
        {
          reasoning: 'The tool says the order shipped with DHL and arrives tomorrow.',
          text: 'Your order A-1042 has shipped with DHL and should arrive tomorrow.',
          chunks: 3,
          usage: { prompt_tokens: 118, completion_tokens: 17 },
        },
      );
      const ended = a.nextEvent('agent:turn:end', (e) => e.sessionId === sessionId);
      await send(page, sessionId, 'Where is my order A-1042?');
      const { turnId } = await ended;
      const done = turnOf(page, turnId);
      await outcomeOf(done, 'replied').waitFor();
      await done.locator('[data-testid="tool-call"][data-state="ok"]').waitFor();
      await done.getByTestId('turn-inputs').filter({ hasText: 'A-1042' }).waitFor();
      expect(await done.getByTestId('turn-reasoning').isVisible()).toBe(true);
      expect(await done.getByTestId('turn-reasoning').getAttribute('open')).toBeNull();
      a.server.enqueue({
        text: 'Here are your last three invoices: #311 (paid), #318 (paid) and #324 (due Friday).',
        chunks: 4,
        hold: true,
      });
      const running = await sendAndHold(page, sessionId, 'And my invoices?');
      await turnOf(page, running).getByTestId('turn-content').filter({ hasText: 'Here' }).waitFor();
      await turnOf(page, running)
        .getByTestId('turn-inputs')
        .filter({ hasText: 'invoices' })
        .waitFor();
      await a
        .http()
        .post('/agent/messages')
        .set(a.auth)
        .send({ sessionId, content: 'Weekly account digest', source: 'scheduler' })
        .expect(202);
      await page.getByTestId('waiting-item').waitFor();
      await page.getByTestId('usage-bar').first().waitFor();
      await page.getByTestId('message-input').blur();

      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      rmSync(SCREENSHOT, { force: true });
      await page.screenshot({ path: SCREENSHOT });

      const png = readFileSync(SCREENSHOT);
      expect(png.subarray(0, 8)).toEqual(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]));
      expect(png.length).toBeGreaterThan(10_000);
      const settled = a.nextEvent(
        'agent:turn:end',
        (e) => e.sessionId === sessionId && e.turnId !== running,
      );
      a.server.release();
      await settled;
    } finally {
      dispose();
    }
  });
  it('lists the sessions made before the page opened, most recent first, again after a reload; more load when the list is scrolled to its end', async () => {
    // Older than the named ones: 55 sessions with settings only, so the list has a second page.
    for (let i = 0; i < 55; i++) {
      const id = `dash-bulk-${String(i).padStart(2, '0')}`;
      await a.http().put(`/agent/sessions/${id}`).set(a.auth).send({}).expect(200);
    }
    for (const id of ['dash-old-1', 'dash-old-2']) {
      await a
        .http()
        .post('/agent/messages?wait=true')
        .set(a.auth)
        .send({ sessionId: id, content: 'before the page opened' })
        .expect(200);
    }
    await a.http().put('/agent/sessions/dash-old-settings').set(a.auth).send({}).expect(200);

    const page = await openDashboard();
    const items = page.getByTestId('session-item');
    const listed = () => attributesOf(page, 'session-item', 'sessionId');
    await items.filter({ hasText: 'dash-old-1' }).waitFor();

    const first = await listed();
    expect(first.slice(0, 3)).toEqual(['dash-old-settings', 'dash-old-2', 'dash-old-1']);
    expect(first).toHaveLength(50);
    expect(first).not.toContain('dash-bulk-00');
    await page
      .locator(
        '[data-testid="session-item"][data-session-id="dash-old-settings"][data-state="idle"]',
      )
      .waitFor();

    await page.getByTestId('session-list-more').scrollIntoViewIfNeeded();
    await items.filter({ hasText: 'dash-bulk-00' }).waitFor();
    const all = await listed();
    expect(all.slice(0, 50)).toEqual(first);
    expect(new Set(all).size).toBe(all.length);

    await page.reload();
    await page.locator('[data-testid="connection-status"][data-state="live"]').waitFor();
    await items.filter({ hasText: 'dash-old-1' }).waitFor();
    expect((await listed()).slice(0, 3)).toEqual(['dash-old-settings', 'dash-old-2', 'dash-old-1']);
  });

  it("a session's older turns load page by page when its turns are scrolled to the end, down to the first", async () => {
    const sessionId = 'dash-long';
    const start = Date.parse('2024-01-01T00:00:00.000Z');
    const turnIds = Array.from({ length: 250 }, (_, i) => `long-${String(i).padStart(3, '0')}`);
    // 500 persisted messages, a turn a second: more than one history page (400) holds.
    const history: NewMessage[] = turnIds.flatMap((turnId, i) => {
      const createdAt = new Date(start + i * 1000).toISOString();
      return [
        {
          sessionId,
          role: 'user' as const,
          content: `question ${i}`,
          metadata: { turnId, turnEntry: 'opened' },
          createdAt,
        },
        {
          sessionId,
          role: 'assistant' as const,
          content: `answer ${i}`,
          metadata: { turnId, turnRecord: { outcome: 'replied' } },
          createdAt,
        },
      ];
    });
    await a.app.get<MessageArchivePort>(MessageArchive).append(history);

    const page = await openDashboard();
    await page.getByTestId('watch-input').fill(sessionId);
    await page.getByTestId('watch-submit').click();
    const turns = page.getByTestId('turn');
    const shown = () => attributesOf(page, 'turn', 'turnId');
    await turnOf(page, 'long-249').waitFor();

    // The newest turns first, as many as the page keeps (50); the older ones on scrolling.
    expect(await shown()).toEqual([...turnIds].reverse().slice(0, 50));
    const more = page.getByTestId('history-more');
    for (let loads = 1; !(await turnOf(page, 'long-000').count()); loads++) {
      expect(loads).toBeLessThanOrEqual(4);
      const before = await turns.count();
      await more.scrollIntoViewIfNeeded();
      // More turns than before: the next older page is in.
      await turns.nth(before).waitFor();
    }

    expect(await shown()).toEqual([...turnIds].reverse());
    await more.waitFor({ state: 'hidden' });
    await turnOf(page, 'long-000')
      .getByTestId('turn-inputs')
      .filter({ hasText: 'question 0' })
      .waitFor();
  });
});
