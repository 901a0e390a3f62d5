/*
 * The operators' dashboard (README.md, "Dashboard"). Plain browser script, no build step, no
 * dependency but the Socket.IO client the server itself serves. Everything it shows comes from
 * the agent's Socket.IO namespace and its admin REST routes (README.md, "Socket.IO (namespace
 * `/agent`)" and "REST API"), with the admin token the operator types in, kept for this tab only
 * (sessionStorage). Where they are (`/agent` on the server, under the host's path when
 * embedded) the page says in its `agent-api-base` and `agent-namespace` meta tags.
 *
 * Text from the server is only ever written with textContent / attributes, never as HTML.
 */
(function () {
  'use strict';

  const metaOf = (name, fallback) => {
    const meta = document.querySelector('meta[name="' + name + '"]');
    return meta && meta.content ? meta.content : fallback;
  };
  /** Path of the REST routes, e.g. '/agent' or '/api/agent'. */
  const API_BASE = metaOf('agent-api-base', '/agent');
  /** Socket.IO namespace, e.g. '/agent'. */
  const NAMESPACE = metaOf('agent-namespace', '/agent');
  const TOKEN_KEY = 'agent-dashboard.token';
  const MAX_TURNS = 50;
  const HISTORY_WINDOW = 400;
  const ACK_TIMEOUT_MS = 15000;
  const DEFAULT_SESSION = 'dashboard-test';
  const TEST_USER = { userId: 'dashboard', platform: 'dashboard' };

  // ---- DOM helpers --------------------------------------------------------------------------

  const byTestId = (id) => document.querySelector('[data-testid="' + id + '"]');

  /** Creates an element; text only ever through textContent, data through dataset/title. */
  function el(tag, options, children) {
    const node = document.createElement(tag);
    const opts = options || {};
    if (opts.className) node.className = opts.className;
    if (opts.testId) node.dataset.testid = opts.testId;
    if (opts.text !== undefined) node.textContent = String(opts.text);
    if (opts.title !== undefined) node.title = String(opts.title);
    if (opts.data) for (const key of Object.keys(opts.data)) node.dataset[key] = opts.data[key];
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  const ui = {
    status: byTestId('connection-status'),
    forget: byTestId('forget-token'),
    tokenPanel: byTestId('token-panel'),
    tokenForm: byTestId('token-form'),
    tokenInput: byTestId('token-input'),
    tokenError: byTestId('token-error'),
    dashboard: byTestId('dashboard'),
    sessionList: byTestId('session-list'),
    sessionListEmpty: byTestId('session-list-empty'),
    watchForm: byTestId('watch-form'),
    watchInput: byTestId('watch-input'),
    sessionEmpty: byTestId('session-empty'),
    sessionBody: byTestId('session-body'),
    sessionId: byTestId('selected-session-id'),
    sessionState: byTestId('selected-session-state'),
    stopAll: byTestId('stop-all-button'),
    stopAllStatus: byTestId('stop-all-status'),
    stop: byTestId('stop-button'),
    stopDrop: byTestId('stop-drop-button'),
    modelForm: byTestId('model-form'),
    modelProvider: byTestId('model-provider'),
    modelInput: byTestId('model-input'),
    clear: byTestId('clear-button'),
    actionStatus: byTestId('action-status'),
    turns: byTestId('turns'),
    turnsEmpty: byTestId('turns-empty'),
    approvalList: byTestId('approval-list'),
    approvalsEmpty: byTestId('approvals-empty'),
    approvalCount: byTestId('approval-count'),
    waitingList: byTestId('waiting-list'),
    waitingEmpty: byTestId('waiting-empty'),
    waitingCount: byTestId('waiting-count'),
    usageEmpty: byTestId('usage-empty'),
    usageBody: byTestId('usage-body'),
    usageTotal: byTestId('usage-total'),
    usageMeter: byTestId('usage-meter'),
    usageBars: byTestId('usage-bars'),
    usageNotes: byTestId('usage-notes'),
    messageForm: byTestId('message-form'),
    messageSession: byTestId('message-session'),
    messageInput: byTestId('message-input'),
  };

  const number = new Intl.NumberFormat('en-US');
  const formatTokens = (n) => number.format(Math.round(Number(n) || 0));
  const percent = (part, whole) => (whole > 0 ? (100 * part) / whole : 0);
  /** 1 decimal from 1%, 2 below (a few hundred tokens of a large window still show). */
  const formatPercent = (p) =>
    (p <= 0 ? '0' : p < 0.01 ? '<0.01' : p < 1 ? p.toFixed(2) : p.toFixed(1)) + '%';
  const timeOf = (date) => date.toLocaleTimeString([], { hour12: false });

  // ---- state --------------------------------------------------------------------------------

  /** @type {{ token: string | null, socket: any, sessions: Map<string, any>, selected: string | null }} */
  const state = { token: null, socket: null, sessions: new Map(), selected: null };

  function sessionOf(id) {
    let session = state.sessions.get(id);
    if (!session) {
      session = {
        id,
        runningTurnId: null,
        clearing: false,
        waiting: [],
        // Tool calls waiting for a person's approval: { callId, turnId, name, args }.
        approvals: [],
        approvalEvents: 0,
        usage: null,
        turns: [],
        turnById: new Map(),
        lastActivity: Date.now(),
        historyLoaded: false,
        queueEvents: 0,
        historyTimer: null,
        status: null,
        // From GET /agent/sessions until live events tell more.
        listedWaiting: 0,
        lastOutcome: null,
        // Older history: turns kept (raised by each older page), whether older ones exist.
        maxTurns: MAX_TURNS,
        hasOlder: false,
        oldestReached: false,
        olderLoading: false,
      };
      state.sessions.set(id, session);
      listDirty = true;
      if (!state.selected) select(id);
    }
    return session;
  }

  const sessionState = (s) => (s.clearing ? 'held' : s.runningTurnId ? 'running' : 'idle');

  /** Tie-break of turns that started in the same millisecond: the order they were learnt. */
  let turnSeq = 0;

  function turnOf(session, turnId, startedAt, order) {
    let turn = session.turnById.get(turnId);
    if (!turn) {
      turn = {
        id: turnId,
        startedAt: startedAt || new Date(),
        order: order === undefined ? ++turnSeq : order,
        ended: false,
        outcome: null,
        error: null,
        // In order: { kind: 'text', text } per answer segment, { kind: 'tool', call } per call.
        blocks: [],
        tools: new Map(),
        reasoning: '',
        reasoningBreak: false,
        streamDone: false,
        // seq of the last event of the turn's stream applied: a reconnect resumes after it.
        lastSeq: 0,
        sent: [],
        inputs: [],
        past: false,
        view: null,
        dirty: true,
      };
      session.turnById.set(turnId, turn);
      session.turns.push(turn);
      session.turns.sort((a, b) => a.startedAt - b.startedAt || a.order - b.order);
      while (session.turns.length > session.maxTurns) {
        const dropped = session.turns.shift();
        session.turnById.delete(dropped.id);
        if (dropped.view) dropped.view.root.remove();
        // What was dropped can be loaded again by scrolling to the oldest turn.
        session.hasOlder = true;
        session.oldestReached = false;
      }
    }
    // Every caller changes the turn: draw it again on the next frame.
    turn.dirty = true;
    return turn;
  }

  /** Streamed text: continues the last text segment, or starts one after a tool call. */
  function appendText(turn, text) {
    const last = turn.blocks[turn.blocks.length - 1];
    if (last && last.kind === 'text') last.text += text;
    else turn.blocks.push({ kind: 'text', text });
  }

  function appendReasoning(turn, text) {
    if (turn.reasoningBreak && turn.reasoning) turn.reasoning += '\n\n';
    turn.reasoningBreak = false;
    turn.reasoning += text;
  }

  /** A tool call: a block of its own, where it happened; later events update it in place. */
  function noteTool(turn, call) {
    const known = turn.tools.get(call.callId);
    if (known) {
      Object.assign(known, call);
      return;
    }
    turn.tools.set(call.callId, call);
    turn.blocks.push({ kind: 'tool', call });
    turn.reasoningBreak = true;
  }

  /** The answer's last text segment: what the reply usually is. */
  function lastText(turn) {
    for (let i = turn.blocks.length - 1; i >= 0; i--) {
      if (turn.blocks[i].kind === 'text') return turn.blocks[i].text;
    }
    return '';
  }

  function touch(session) {
    session.lastActivity = Date.now();
  }

  // ---- rendering ----------------------------------------------------------------------------

  let frame = 0;
  let listDirty = true;

  /** Draws on the next frame; `list`: the session list changed too (states, counts, order). */
  function render(list) {
    if (list) listDirty = true;
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      if (listDirty) renderSessions();
      listDirty = false;
      renderSelected();
    });
  }

  function renderSessions() {
    const sessions = [...state.sessions.values()].sort((a, b) => b.lastActivity - a.lastActivity);
    ui.sessionListEmpty.hidden = sessions.length > 0;
    ui.sessionList.replaceChildren(
      ...sessions.map((s) => {
        const current = sessionState(s);
        const last = s.turns[s.turns.length - 1];
        const item = el(
          'li',
          {
            className: 'session-item' + (s.id === state.selected ? ' selected' : ''),
            testId: 'session-item',
            data: { sessionId: s.id, state: current },
          },
          [
            el('span', { className: 'session-name', text: s.id, title: s.id }),
            el('span', {
              className: 'badge state-' + current,
              testId: 'session-state',
              text: current,
            }),
            s.waiting.length || s.listedWaiting
              ? el('span', {
                  className: 'count',
                  text: (s.waiting.length || s.listedWaiting) + ' waiting',
                })
              : null,
            (last && last.outcome) || s.lastOutcome
              ? el('span', {
                  className: 'muted small',
                  text: 'last: ' + ((last && last.outcome) || s.lastOutcome),
                })
              : null,
          ],
        );
        item.tabIndex = 0;
        item.setAttribute('role', 'button');
        return item;
      }),
    );
  }

  function renderSelected() {
    const session = state.selected ? state.sessions.get(state.selected) : undefined;
    ui.sessionEmpty.hidden = !!session;
    ui.sessionBody.hidden = !session;
    if (!session) {
      showMore(pages.historyMore, false);
      return;
    }
    const current = sessionState(session);
    ui.sessionId.textContent = session.id;
    ui.sessionState.textContent = current;
    ui.sessionState.className = 'badge state-' + current;
    ui.sessionState.dataset.state = current;
    ui.stop.disabled = !session.runningTurnId || session.clearing;
    ui.stopDrop.disabled = (!session.runningTurnId && !session.waiting.length) || session.clearing;
    ui.clear.disabled = session.clearing;
    renderStatus(session);
    renderTurns(session);
    showMore(pages.historyMore, session.hasOlder && session.turns.length > 0);
    renderApprovals(session);
    renderWaiting(session);
    renderUsage(session);
  }

  function renderStatus(session) {
    const status = session.status;
    ui.actionStatus.textContent = status ? status.text : '';
    ui.actionStatus.className = 'action-status' + (status && status.error ? ' error' : '');
  }

  function renderTurns(session) {
    ui.turnsEmpty.hidden = session.turns.length > 0;
    const views = session.turns.map((turn) => renderTurn(turn));
    // Newest first; re-append only when the order changed (keeps <details> state and selection).
    views.reverse();
    const same =
      views.length === ui.turns.children.length &&
      views.every((view, i) => ui.turns.children[i] === view);
    if (!same) ui.turns.replaceChildren(...views);
  }

  function createTurnView(turn) {
    const view = {};
    view.outcome = el('span', { className: 'badge', testId: 'turn-outcome' });
    view.time = el('span', { className: 'muted small' });
    view.head = el('div', { className: 'turn-head' }, [
      el('span', { className: 'turn-id', text: 'turn ' + turn.id.slice(0, 8), title: turn.id }),
      view.time,
      view.outcome,
    ]);
    view.inputs = el('ul', { className: 'turn-inputs', testId: 'turn-inputs' });
    view.reasoningSummary = el('summary', { text: 'Reasoning' });
    view.reasoningText = el('pre', { className: 'reasoning-text' });
    view.reasoning = el('details', { className: 'reasoning', testId: 'turn-reasoning' }, [
      view.reasoningSummary,
      view.reasoningText,
    ]);
    view.pending = el('p', { className: 'muted small pending', text: 'waiting for the model…' });
    view.body = el('div', { className: 'turn-body' }, [view.pending]);
    view.blocks = [];
    view.sent = el('div', { className: 'turn-sent' });
    view.error = el('p', { className: 'turn-error', testId: 'turn-error' });
    view.root = el('li', { className: 'turn', testId: 'turn', data: { turnId: turn.id } }, [
      view.head,
      view.inputs,
      view.reasoning,
      view.body,
      view.sent,
      view.error,
    ]);
    return view;
  }

  function renderTurn(turn) {
    if (turn.view && !turn.dirty) return turn.view.root;
    turn.dirty = false;
    const view = turn.view || (turn.view = createTurnView(turn));
    const label = turn.ended ? turn.outcome || 'ended' : 'running';
    view.root.dataset.state = turn.ended ? 'ended' : 'running';
    view.root.dataset.outcome = turn.outcome || '';
    view.outcome.textContent = label;
    view.outcome.className = 'badge outcome-' + label;
    view.time.textContent = timeOf(turn.startedAt) + (turn.past ? ' · from history' : '');

    view.inputs.hidden = !turn.inputs.length;
    view.inputs.replaceChildren(
      ...turn.inputs.map((input) =>
        el('li', { className: 'turn-input' }, [
          el('span', {
            className: 'source source-' + (input.source ? 'system' : 'human'),
            text: input.source || input.userId || 'human',
          }),
          el('span', { text: input.content }),
        ]),
      ),
    );

    view.reasoning.hidden = !turn.reasoning;
    view.reasoningSummary.textContent =
      'Reasoning (' + number.format(turn.reasoning.length) + ' characters)';
    if (view.reasoningText.textContent !== turn.reasoning) {
      view.reasoningText.textContent = turn.reasoning;
    }

    turn.blocks.forEach((block, i) => {
      let node = view.blocks[i];
      if (!node) {
        node = view.blocks[i] = createBlockView(block);
        view.body.appendChild(node.root);
      }
      updateBlockView(node, block);
    });
    view.pending.hidden = turn.ended || turn.blocks.some((b) => b.kind === 'tool' || b.text);
    const last = view.blocks[view.blocks.length - 1];
    view.blocks.forEach((node) => node.root.classList.remove('streaming'));
    if (
      last &&
      !turn.ended &&
      !turn.streamDone &&
      turn.blocks[turn.blocks.length - 1].kind === 'text'
    ) {
      last.root.classList.add('streaming');
    }

    // What was sent, when it is not just the streamed text (hooks may change it; notices).
    const reply = lastText(turn).trim();
    const extra = turn.sent.filter((m) => m.content.trim() !== reply);
    view.sent.hidden = !extra.length;
    view.sent.replaceChildren(
      ...extra.map((m) =>
        el('div', { className: 'sent sent-' + m.source, testId: 'turn-sent' }, [
          el('span', { className: 'muted small', text: m.source === 'system' ? 'notice' : 'sent' }),
          el('div', { text: m.content }),
        ]),
      ),
    );

    view.error.hidden = !turn.error;
    view.error.textContent = turn.error || '';
    return view.root;
  }

  function createBlockView(block) {
    if (block.kind === 'text') {
      return { root: el('div', { className: 'turn-content', testId: 'turn-content' }) };
    }
    const label = el('span', { className: 'tool-state', testId: 'tool-state' });
    const root = el('div', { className: 'tool-call', testId: 'tool-call' }, [
      el('span', { className: 'tool-icon', text: 'tool' }),
      el('span', { className: 'tool-name', text: block.call.name }),
      label,
    ]);
    root.dataset.name = block.call.name;
    root.title = 'call ' + block.call.callId;
    return { root, label };
  }

  function updateBlockView(node, block) {
    if (block.kind === 'text') {
      if (node.root.textContent !== block.text) node.root.textContent = block.text;
      node.root.hidden = !block.text;
      return;
    }
    const call = block.call;
    // From history only: ended, but whether it succeeded is not recorded there.
    const callState =
      call.phase === 'start' ? 'running' : call.ok === false ? 'failed' : call.ok ? 'ok' : 'done';
    node.root.dataset.state = callState;
    node.root.className = 'tool-call tool-' + callState;
    node.label.textContent = callState;
  }

  /** What the side panels show now: redrawn only when it changes (keeps hover titles up). */
  const shown = { waiting: null, usage: null, approvals: null };

  /** The selected session's tool calls awaiting approval, each with Approve and Deny. */
  function renderApprovals(session) {
    if (shown.approvals === session.approvals) return;
    shown.approvals = session.approvals;
    ui.approvalCount.textContent = String(session.approvals.length);
    ui.approvalsEmpty.hidden = session.approvals.length > 0;
    ui.approvalList.replaceChildren(
      ...session.approvals.map((call) => {
        const approve = el('button', { testId: 'approve-button', text: 'Approve' });
        const deny = el('button', {
          className: 'danger outline',
          testId: 'deny-button',
          text: 'Deny',
        });
        approve.type = deny.type = 'button';
        approve.addEventListener('click', () => decide(session, call, true));
        deny.addEventListener('click', () => decide(session, call, false));
        return el(
          'li',
          { className: 'approval-item', testId: 'approval-item', data: { callId: call.callId } },
          [
            el('strong', { testId: 'approval-name', text: call.name }),
            el('pre', {
              className: 'approval-args',
              testId: 'approval-args',
              text: argsText(call.args),
            }),
            el('div', { className: 'approval-actions' }, [approve, deny]),
          ],
        );
      }),
    );
  }

  function argsText(args) {
    try {
      return JSON.stringify(args, null, 2);
    } catch {
      return String(args);
    }
  }

  /** Notes a call as waiting (once) or as no longer waiting. */
  function noteApproval(session, call, waiting) {
    const others = session.approvals.filter((c) => c.callId !== call.callId);
    session.approvals = waiting ? others.concat([call]) : others;
  }

  function renderWaiting(session) {
    if (shown.waiting === session.waiting) return;
    shown.waiting = session.waiting;
    ui.waitingCount.textContent = String(session.waiting.length);
    ui.waitingEmpty.hidden = session.waiting.length > 0;
    ui.waitingList.replaceChildren(
      ...session.waiting.map((input) =>
        el('li', { className: 'waiting-item', testId: 'waiting-item' }, [
          el('span', {
            className: 'source source-' + (input.source ? 'system' : 'human'),
            testId: 'waiting-source',
            text: input.source || 'human',
          }),
          el('span', {
            className: 'waiting-content',
            testId: 'waiting-content',
            text: input.content,
          }),
          input.userId || input.platform
            ? el('span', {
                className: 'muted small',
                text: [input.userId, input.platform].filter(Boolean).join(' @ '),
              })
            : null,
        ]),
      ),
    );
  }

  function renderUsage(session) {
    const usage = session.usage;
    if (shown.usage === usage && usage) return;
    shown.usage = usage;
    ui.usageEmpty.hidden = !!usage;
    ui.usageBody.hidden = !usage;
    if (!usage) return;
    const contextWindow = Number(usage.contextWindow) || 0;
    const ratio = percent(usage.used, contextWindow);
    ui.usageTotal.replaceChildren(
      el('span', {
        className: 'usage-used',
        text: formatTokens(usage.used) + ' / ' + formatTokens(contextWindow) + ' tokens',
      }),
      el('span', {
        className: 'usage-ratio',
        testId: 'usage-ratio',
        text: formatPercent(ratio) + ' of the context window',
      }),
    );
    ui.usageMeter.firstElementChild.style.width = Math.min(100, ratio) + '%';
    ui.usageMeter.title = formatPercent(ratio) + ' of ' + formatTokens(contextWindow) + ' tokens';
    const parts = Array.isArray(usage.parts) ? usage.parts : [];
    const largest = Math.max(1, ...parts.map((p) => Number(p.tokens) || 0));
    ui.usageBars.replaceChildren(
      ...parts.map((part) => {
        const tokens = Number(part.tokens) || 0;
        const share = percent(tokens, contextWindow);
        const fill = el('span', { className: 'bar-fill' });
        fill.style.width = (tokens > 0 ? Math.max(1, (100 * tokens) / largest) : 0) + '%';
        return el(
          'li',
          {
            className: 'usage-bar',
            testId: 'usage-bar',
            data: { label: part.label },
            title: injectorsText(part, share),
          },
          [
            el('span', { className: 'bar-label', testId: 'usage-bar-label', text: part.label }),
            el('span', { className: 'bar-track' }, [fill]),
            el('span', {
              className: 'bar-value',
              testId: 'usage-bar-tokens',
              text: formatTokens(tokens),
            }),
            el('span', { className: 'bar-share muted', text: formatPercent(share) }),
          ],
        );
      }),
    );
    const notes = [
      'history ' + usage.historyMessages + ' message(s)',
      'reply reserve ' + formatTokens(usage.maxTokens),
      'budget ' + formatTokens(usage.tokenBudget),
    ];
    if (usage.trimmed) notes.push('trimmed from ' + usage.untrimmedHistory + ' messages');
    if (usage.turnId) notes.push('turn ' + String(usage.turnId).slice(0, 8));
    ui.usageNotes.textContent = notes.join(' · ');
  }

  function injectorsText(part, share) {
    const lines = [
      part.label + ': ' + formatTokens(part.tokens) + ' tokens, ' + formatPercent(share),
    ];
    const injectors = part.injectors ? Object.entries(part.injectors) : [];
    if (!injectors.length) lines.push('no injector detail');
    else {
      lines.push('injectors:');
      injectors
        .sort((a, b) => b[1] - a[1])
        .forEach(([key, tokens]) => lines.push('  ' + key + ': ' + formatTokens(tokens)));
    }
    return lines.join('\n');
  }

  function setStatus(session, text, error) {
    session.status = { text, error: !!error };
    render();
  }

  // ---- selection ----------------------------------------------------------------------------

  function select(id) {
    state.selected = id;
    ui.messageSession.value = id;
    const session = state.sessions.get(id);
    if (session && !session.historyLoaded && state.socket && state.socket.connected) {
      refresh(session);
    }
    render(true);
  }

  // ---- REST ---------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + state.token };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
    const data = parseJson(await response.text());
    if (response.status === 401) {
      refused();
      throw new ApiError(401, 'token refused');
    }
    if (!response.ok) {
      const message = (data && data.message) || response.statusText || 'request failed';
      throw new ApiError(response.status, message);
    }
    return data;
  }

  function parseJson(text) {
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      return null;
    }
  }

  const sessionPath = (id) => API_BASE + '/sessions/' + encodeURIComponent(id);

  /** Loads what REST knows of a session: waiting inputs, a usage snapshot, past turns. */
  async function refresh(session) {
    session.historyLoaded = true;
    // An answer never replaces what a socket event told meanwhile (it would be older).
    const queueEvents = session.queueEvents;
    const queue = api('GET', sessionPath(session.id) + '/queue').then((answer) => {
      if (answer && session.queueEvents === queueEvents) session.waiting = answer.waiting || [];
    });
    const usage = session.usage
      ? null
      : api('GET', sessionPath(session.id) + '/usage').then((answer) => {
          if (answer) applyUsage(session, answer);
        });
    const approvalEvents = session.approvalEvents;
    const approvals = api('GET', sessionPath(session.id) + '/approvals').then((answer) => {
      if (!answer || !Array.isArray(answer.approvals)) return;
      if (session.approvalEvents === approvalEvents) session.approvals = answer.approvals;
    });
    await Promise.allSettled([queue, usage, approvals, loadHistory(session)]);
    render(true);
  }

  /** Fills turns from the persisted history: their inputs, and the turns this page missed. */
  async function loadHistory(session) {
    let answer;
    try {
      answer = await api('GET', sessionPath(session.id) + '/history?limit=' + HISTORY_WINDOW);
    } catch {
      return;
    }
    mergeHistory(session, (answer && answer.messages) || [], false);
    if (answer && answer.nextBefore && !session.oldestReached) session.hasOlder = true;
    const last = session.turns[session.turns.length - 1];
    if (last && !last.ended && !session.runningTurnId) session.runningTurnId = last.id;
    render(true);
  }

  /**
   * Adds one history page's turns. `older`: the page comes before every turn shown (the turn
   * cut at its end began on it: its earlier inputs go first).
   */
  function mergeHistory(session, messages, older) {
    const byTurn = new Map();
    for (const message of messages.slice(-HISTORY_WINDOW)) {
      const turnId = message.metadata && message.metadata.turnId;
      if (!turnId) continue;
      if (!byTurn.has(turnId)) byTurn.set(turnId, []);
      byTurn.get(turnId).push(message);
    }
    // An older page's turns come before every turn shown, also when their times are equal.
    let order =
      older && session.turns.length ? session.turns[0].order - byTurn.size - 1 : undefined;
    for (const [turnId, list] of byTurn) {
      const known = session.turnById.get(turnId);
      const startedAt = new Date(list[0].createdAt);
      const turn =
        known || turnOf(session, turnId, startedAt, order === undefined ? order : ++order);
      turn.dirty = true;
      const inputs = list
        .filter((m) => m.role === 'user')
        .map((m) => ({
          content: m.content,
          source: m.metadata.source,
          userId: m.metadata.userId,
        }));
      if (known && older) {
        turn.inputs = inputs.concat(turn.inputs);
        turn.firstMessageId = list[0].id;
        continue;
      }
      // A page that cuts the turn (it began before) does not replace the inputs it lacks.
      const cut = known && turn.firstMessageId && turn.firstMessageId !== list[0].id;
      if (!cut) turn.inputs = inputs;
      if (!turn.firstMessageId) turn.firstMessageId = list[0].id;
      if (known) continue;
      turn.past = true;
      for (const m of list) {
        const record = m.metadata.turnRecord;
        if (record) {
          // Every finished turn has a record (P4); a turn without one is still running.
          turn.ended = true;
          turn.outcome = record.outcome || turn.outcome;
          turn.error = record.error || turn.error;
        }
        if (m.role === 'assistant' && m.reasoningContent) appendReasoning(turn, m.reasoningContent);
        if (m.role === 'assistant' && m.content && !m.kind) appendText(turn, m.content);
        for (const call of m.toolCalls || []) {
          noteTool(turn, { callId: call.id, name: call.function.name, phase: 'end' });
        }
      }
    }
  }

  function historySoon(session) {
    if (session.id !== state.selected) {
      session.historyLoaded = false;
      return;
    }
    clearTimeout(session.historyTimer);
    session.historyTimer = setTimeout(() => loadHistory(session), 150);
  }

  // ---- pages: the session list and older history, loaded when scrolled to their end --------

  const SESSION_PAGE = 50;
  const SESSION_LIST_PATH = API_BASE + '/sessions';
  const pages = {
    sessionsMore: byTestId('session-list-more'),
    historyMore: byTestId('history-more'),
    /** `nextCursor` of the last page of the session list; null: no page follows. */
    cursor: null,
    loading: false,
    /** Moves on when the list is read from its start again: older answers are dropped. */
    epoch: 0,
  };

  /** Reads the session list from its first page (on connect, so after a reload or reconnect). */
  function reloadSessionList() {
    pages.epoch++;
    pages.cursor = null;
    pages.loading = false;
    loadSessionPage();
  }

  /** Forgets the pages read (another token sees other data). */
  function forgetSessionPages() {
    pages.epoch++;
    pages.cursor = null;
    pages.loading = false;
    showMore(pages.sessionsMore, false);
  }

  /** The next page of the session list (the first without a cursor), most recent first. */
  async function loadSessionPage() {
    if (pages.loading) return;
    pages.loading = true;
    const epoch = pages.epoch;
    const query =
      '?limit=' +
      SESSION_PAGE +
      (pages.cursor ? '&cursor=' + encodeURIComponent(pages.cursor) : '');
    let answer = null;
    try {
      answer = await api('GET', SESSION_LIST_PATH + query);
    } catch {
      // E.g. 501 (the host's session store cannot list): the live sessions still show.
    }
    if (epoch !== pages.epoch) return;
    pages.loading = false;
    if (answer) {
      for (const summary of answer.sessions || []) noteListed(summary);
      pages.cursor = answer.nextCursor || null;
    } else {
      pages.cursor = null;
    }
    showMore(pages.sessionsMore, !!pages.cursor);
    render(true);
  }

  /** A session of the list: known from now on, placed by its last activity. */
  function noteListed(summary) {
    if (!summary || typeof summary.sessionId !== 'string') return;
    const known = state.sessions.has(summary.sessionId);
    const session = sessionOf(summary.sessionId);
    const at = Date.parse(summary.updatedAt) || 0;
    session.lastActivity = known ? Math.max(session.lastActivity, at) : at;
    if (summary.lastTurn && summary.lastTurn.outcome)
      session.lastOutcome = summary.lastTurn.outcome;
    // Live events of a known session are newer than the list.
    if (known) return;
    session.runningTurnId = summary.runningTurnId || null;
    session.listedWaiting = Number(summary.waiting) || 0;
  }

  /** The turns before the oldest one shown: one older history page. */
  async function loadOlder(session) {
    if (!session || session.olderLoading || !session.hasOlder) return;
    const oldest = session.turns.find((turn) => turn.firstMessageId);
    if (!oldest) return;
    session.olderLoading = true;
    let answer = null;
    try {
      answer = await api(
        'GET',
        sessionPath(session.id) +
          '/history?limit=' +
          HISTORY_WINDOW +
          '&before=' +
          encodeURIComponent(oldest.firstMessageId),
      );
    } catch {
      // Shown again on the next scroll.
    }
    session.olderLoading = false;
    if (answer) {
      session.maxTurns += MAX_TURNS;
      session.hasOlder = false;
      mergeHistory(session, answer.messages || [], true);
      // Turns dropped by the cap just now set hasOlder again.
      if (answer.nextBefore) session.hasOlder = true;
      session.oldestReached = !session.hasOlder;
    }
    render(true);
    recheck(pages.historyMore);
  }

  /** Loads the next page while a marker at a list's end is in view. */
  const observer =
    typeof IntersectionObserver === 'function'
      ? new IntersectionObserver((entries) => {
          for (const entry of entries) {
            if (!entry.isIntersecting) continue;
            if (entry.target === pages.sessionsMore) loadSessionPage();
            else if (entry.target === pages.historyMore) loadOlder(selectedSession());
          }
        })
      : null;
  if (observer) {
    observer.observe(pages.sessionsMore);
    observer.observe(pages.historyMore);
  }

  /** Shows or hides a list's "more" marker; a marker shown again is looked at again. */
  function showMore(marker, shown) {
    if (marker.hidden === !shown) return;
    marker.hidden = !shown;
    if (shown) recheck(marker);
  }

  /** An observed marker still in view after a page was added: the observer answers again. */
  function recheck(marker) {
    if (!observer || marker.hidden) return;
    observer.unobserve(marker);
    observer.observe(marker);
  }

  // ---- socket -------------------------------------------------------------------------------

  function setConnection(kind, text) {
    ui.status.dataset.state = kind;
    ui.status.textContent = text;
  }

  function emit(event, payload) {
    return new Promise((resolve, reject) => {
      if (!state.socket || !state.socket.connected) {
        reject(new Error('not connected'));
        return;
      }
      state.socket.timeout(ACK_TIMEOUT_MS).emit(event, payload, (error, answer) => {
        if (error) reject(new Error('no answer from the server'));
        else if (answer && typeof answer.statusCode === 'number') {
          reject(new ApiError(answer.statusCode, answer.message));
        } else resolve(answer);
      });
    });
  }

  function connect(token) {
    if (typeof window.io !== 'function') {
      showTokenForm('The Socket.IO client could not be loaded from /socket.io/socket.io.min.js.');
      return;
    }
    disconnect();
    state.token = token;
    setConnection('connecting', 'connecting…');
    // WebSocket first: behind a load balancer without sticky sessions only HTTP long-polling
    // breaks (each poll may reach another instance), so polling is the fallback, not the start.
    const socket = window.io(NAMESPACE, {
      auth: { token },
      reconnectionDelayMax: 5000,
      transports: ['websocket', 'polling'],
      tryAllTransports: true,
    });
    state.socket = socket;

    socket.on('connect', () => {
      sessionStorage.setItem(TOKEN_KEY, token);
      ui.tokenPanel.hidden = true;
      ui.dashboard.hidden = false;
      ui.forget.hidden = false;
      ui.tokenError.hidden = true;
      // The turns that were running resume first (their missed events, then the live ones, in
      // the session's room), then every session: joining all sessions first would deliver live
      // events before the replay of older ones.
      resumeTurns()
        .then(() => emit('subscribe', { all: true }))
        .then(() => {
          setConnection('live', 'live');
          for (const session of state.sessions.values()) session.historyLoaded = false;
          const selected = state.selected && state.sessions.get(state.selected);
          if (selected) refresh(selected);
          reloadSessionList();
        })
        .catch((error) => setConnection('offline', 'subscribe failed: ' + error.message));
    });
    socket.on('connect_error', (error) => {
      if (socket !== state.socket) return;
      // A refused handshake is final (no retry); anything else is retried by the client.
      if (!socket.active || /unauthori[sz]ed/i.test(String(error && error.message))) refused();
      else setConnection('offline', 'cannot reach the server, retrying…');
    });
    socket.on('disconnect', (reason) => {
      if (socket !== state.socket) return;
      setConnection('offline', 'disconnected (' + reason + ')');
      if (reason === 'io server disconnect') setTimeout(() => socket.connect(), 2000);
    });

    socket.on('turn', (event) => {
      const session = sessionOf(event.sessionId);
      touch(session);
      const turn = turnOf(session, event.turnId);
      if (!fresh(turn, event)) return;
      if (event.phase === 'start') {
        session.runningTurnId = event.turnId;
        // Its inputs are archived as it starts: the history shows them.
        historySoon(session);
      } else {
        turn.ended = true;
        turn.outcome = event.outcome || null;
        turn.error = event.error || null;
        if (session.runningTurnId === event.turnId) session.runningTurnId = null;
        // A turn that ended waits for nothing any more.
        if (session.approvals.some((c) => c.turnId === event.turnId)) {
          session.approvals = session.approvals.filter((c) => c.turnId !== event.turnId);
        }
        historySoon(session);
      }
      render(true);
    });
    socket.on('stream', (event) => {
      const session = sessionOf(event.sessionId);
      const turnId = event.turnId || session.runningTurnId;
      if (!turnId) return;
      const turn = turnOf(session, turnId);
      if (!fresh(turn, event)) return;
      if (event.delta) appendText(turn, event.delta);
      if (event.reasoningDelta) appendReasoning(turn, event.reasoningDelta);
      if (event.done) turn.streamDone = true;
      touch(session);
      render();
    });
    socket.on('message', (event) => {
      const session = sessionOf(event.sessionId);
      const turnId = event.turnId || session.runningTurnId;
      if (!turnId) return;
      const turn = turnOf(session, turnId);
      turn.sent.push({ content: String(event.content || ''), source: event.source || 'agent' });
      if (!turn.reasoning && event.reasoningContent) turn.reasoning = event.reasoningContent;
      touch(session);
      render();
    });
    socket.on('queue', (event) => {
      const session = sessionOf(event.sessionId);
      session.waiting = Array.isArray(event.waiting) ? event.waiting : [];
      session.listedWaiting = 0;
      session.queueEvents++;
      touch(session);
      render(true);
    });
    socket.on('usage', (event) => {
      applyUsage(sessionOf(event.sessionId), event);
      render();
    });
    socket.on('approval', (event) => {
      const session = sessionOf(event.sessionId);
      const call = {
        callId: event.callId,
        turnId: event.turnId,
        name: event.name,
        args: event.args,
      };
      noteApproval(session, call, event.phase === 'requested');
      session.approvalEvents++;
      touch(session);
      render(true);
    });
    socket.on('tool', (event) => {
      const session = sessionOf(event.sessionId);
      const turn = turnOf(session, event.turnId);
      if (!fresh(turn, event)) return;
      noteTool(turn, { callId: event.callId, name: event.name, phase: event.phase, ok: event.ok });
      touch(session);
      render();
    });
  }

  /**
   * Notes an event's place in its turn's stream (`seq`); false for one already applied (a
   * resume never sends one twice: this only guards the page's own state).
   */
  function fresh(turn, event) {
    if (typeof event.seq !== 'number') return true;
    if (event.seq <= turn.lastSeq) return false;
    turn.lastSeq = event.seq;
    return true;
  }

  /**
   * After a reconnect: subscribes with `resume` for every turn that was running when the
   * connection dropped, so its missed stream events come before the live ones. A turn the
   * server cannot resume (ended more than 60 s ago, or unknown there) is forgotten: the
   * history shows it again as persisted.
   */
  function resumeTurns() {
    const resumes = [];
    for (const session of state.sessions.values()) {
      for (const turn of session.turns) {
        if (turn.ended || !turn.lastSeq) continue;
        const resume = { turnId: turn.id, afterSeq: turn.lastSeq };
        resumes.push(
          emit('subscribe', { sessionId: session.id, resume })
            .then((answer) => {
              if (answer && answer.resumed === false) forgetTurn(session, turn);
            })
            .catch(() => forgetTurn(session, turn)),
        );
      }
    }
    return Promise.all(resumes);
  }

  function forgetTurn(session, turn) {
    const at = session.turns.indexOf(turn);
    if (at >= 0) session.turns.splice(at, 1);
    session.turnById.delete(turn.id);
    if (turn.view) turn.view.root.remove();
    if (session.runningTurnId === turn.id) session.runningTurnId = null;
  }

  /** The last call's usage; a snapshot (no turn id) only until a call has been seen. */
  function applyUsage(session, event) {
    if (!event.turnId && session.usage && session.usage.turnId) return;
    session.usage = event;
  }

  function disconnect() {
    if (state.socket) {
      state.socket.removeAllListeners();
      state.socket.disconnect();
      state.socket = null;
    }
  }

  /** Forgets everything seen with a token: the page shows no data without a valid one. */
  function reset() {
    state.sessions.clear();
    state.selected = null;
    forgetSessionPages();
    ui.turns.replaceChildren();
    render(true);
  }

  function refused() {
    sessionStorage.removeItem(TOKEN_KEY);
    disconnect();
    state.token = null;
    reset();
    setConnection('refused', 'token refused');
    showTokenForm('Token refused: the server did not accept this admin token.');
  }

  function showTokenForm(error) {
    ui.dashboard.hidden = true;
    ui.forget.hidden = true;
    ui.tokenPanel.hidden = false;
    ui.tokenError.hidden = !error;
    ui.tokenError.textContent = error || '';
    ui.tokenInput.value = '';
    ui.tokenInput.focus();
  }

  // ---- controls -----------------------------------------------------------------------------

  const selectedSession = () => (state.selected ? state.sessions.get(state.selected) : undefined);

  async function stop(queued) {
    const session = selectedSession();
    if (!session) return;
    const payload = { sessionId: session.id, reason: 'stopped from the dashboard' };
    if (session.runningTurnId) payload.turnId = session.runningTurnId;
    if (queued) payload.queued = true;
    setStatus(session, queued ? 'stopping and dropping the queue…' : 'stopping…');
    try {
      const answer = await emit('abort', payload);
      setStatus(
        session,
        answer && answer.stopped
          ? queued
            ? 'stopped; the waiting inputs are dropped'
            : 'stopped'
          : 'nothing was running',
      );
    } catch (error) {
      setStatus(session, 'stop failed: ' + describe(error), true);
    }
  }

  /** "Stop all": every running turn stops (after a confirmation); waiting inputs stay queued. */
  /** Approves or denies a waiting tool call over the socket (`approve`, ack `{ decided }`). */
  async function decide(session, call, approved) {
    try {
      const answer = await emit('approve', {
        sessionId: session.id,
        callId: call.callId,
        approved,
      });
      noteApproval(session, call, false);
      const verb = approved ? 'approved' : 'denied';
      setStatus(
        session,
        answer && answer.decided
          ? call.name + ' ' + verb
          : call.name + ' was no longer waiting for approval',
      );
    } catch (error) {
      setStatus(session, 'Approval failed: ' + describe(error), true);
    }
    render(true);
  }

  async function stopAll() {
    const sure = window.confirm(
      'Stop every running turn?\n\nWaiting inputs stay queued and run next.',
    );
    if (!sure) return;
    ui.stopAll.disabled = true;
    ui.stopAllStatus.classList.remove('error');
    ui.stopAllStatus.textContent = 'stopping every running turn…';
    try {
      const answer = await api('POST', API_BASE + '/sessions/abort', {
        reason: 'stopped from the dashboard (stop all)',
      });
      const stopped = (answer && answer.stopped) || [];
      ui.stopAllStatus.textContent = stopped.length
        ? 'stopped ' + stopped.length + ': ' + stopped.join(', ')
        : 'nothing was running';
    } catch (error) {
      ui.stopAllStatus.classList.add('error');
      ui.stopAllStatus.textContent = 'stop all failed: ' + describe(error);
    } finally {
      ui.stopAll.disabled = false;
    }
  }

  async function assignModel(event) {
    event.preventDefault();
    const session = selectedSession();
    if (!session) return;
    const model = ui.modelInput.value.trim();
    const provider = ui.modelProvider.value.trim();
    if (!model) return;
    const body = provider ? { provider, model } : { model };
    try {
      await api('PUT', sessionPath(session.id) + '/model', body);
      setStatus(session, 'model set to ' + (provider ? provider + '/' : '') + model);
    } catch (error) {
      setStatus(session, 'model not assigned: ' + describe(error), true);
    }
  }

  async function clearHistory() {
    const session = selectedSession();
    if (!session || session.clearing) return;
    const sure = window.confirm(
      'Clear the history of session "' +
        session.id +
        '"?\n\nThe running turn is stopped and the waiting inputs are dropped.',
    );
    if (!sure) return;
    session.clearing = true;
    render(true);
    setStatus(session, 'clearing…');
    try {
      await api('POST', API_BASE + '/sessions/clear', {
        sessionIds: [session.id],
        reason: 'cleared from the dashboard',
      });
      setStatus(session, 'history cleared at ' + timeOf(new Date()));
    } catch (error) {
      setStatus(session, 'clear failed: ' + describe(error), true);
    } finally {
      session.clearing = false;
      render(true);
    }
  }

  async function sendMessage(event) {
    event.preventDefault();
    const sessionId = ui.messageSession.value.trim();
    const content = ui.messageInput.value;
    if (!sessionId || !content.trim()) return;
    const session = sessionOf(sessionId);
    try {
      await emit('message', Object.assign({ sessionId, content }, TEST_USER));
      ui.messageInput.value = '';
      touch(session);
      select(sessionId);
    } catch (error) {
      select(sessionId);
      setStatus(session, 'message not sent: ' + describe(error), true);
    }
  }

  function describe(error) {
    if (error instanceof ApiError) return error.status + ' ' + error.message;
    return (error && error.message) || String(error);
  }

  // ---- wiring -------------------------------------------------------------------------------

  ui.tokenForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const token = ui.tokenInput.value.trim();
    if (!token) return;
    ui.tokenError.hidden = true;
    connect(token);
  });
  ui.forget.addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    disconnect();
    state.token = null;
    reset();
    setConnection('offline', 'not connected');
    showTokenForm();
  });
  const pick = (event) => {
    const item = event.target.closest('[data-session-id]');
    if (item) select(item.dataset.sessionId);
  };
  ui.sessionList.addEventListener('click', pick);
  ui.sessionList.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' || event.key === ' ') pick(event);
  });
  ui.watchForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = ui.watchInput.value.trim();
    if (!id) return;
    ui.watchInput.value = '';
    const session = sessionOf(id);
    session.historyLoaded = false;
    select(id);
  });
  pages.sessionsMore.addEventListener('click', () => loadSessionPage());
  pages.historyMore.addEventListener('click', () => loadOlder(selectedSession()));
  ui.stopAll.addEventListener('click', stopAll);
  ui.stop.addEventListener('click', () => stop(false));
  ui.stopDrop.addEventListener('click', () => stop(true));
  ui.modelForm.addEventListener('submit', assignModel);
  ui.clear.addEventListener('click', clearHistory);
  ui.messageForm.addEventListener('submit', sendMessage);

  ui.messageSession.value = DEFAULT_SESSION;
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) connect(saved);
  else showTokenForm();
})();
