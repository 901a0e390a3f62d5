import { ApiApp } from '../support/api-app';
import { waitFor } from '../support/distributed-apps';
import { parentIdOf, SpanRecorder } from '../support/span-recorder';

/**
 * Ingress over the server's own doors: an input's `agent.input` span names where it came in, and
 * a REST request's W3C `traceparent` header makes the input's trace a child of the caller's.
 */
describe('tracing at the REST and Socket.IO ingress', () => {
  let spans: SpanRecorder;
  let a: ApiApp;

  beforeAll(async () => {
    spans = SpanRecorder.register();
    a = await ApiApp.start();
  });
  afterAll(async () => {
    await a?.close();
    await spans.unregister();
  });
  beforeEach(() => spans.reset());

  it("S1: POST /agent/messages with a traceparent header: agent.input is a child of the caller's span, ingress rest", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    a.server.enqueue({ text: 'ok' });

    const response = await a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .set('traceparent', `00-${traceId}-${callerSpan}-01`)
      .send({ sessionId: 'rest', content: 'hi' });

    expect(response.status).toBe(200);
    const input = spans.one('agent.input', { 'gen_ai.conversation.id': 'rest' });
    expect(input.spanContext().traceId).toBe(traceId);
    expect(parentIdOf(input)).toBe(callerSpan);
    expect(input.attributes['agent.input.ingress']).toBe('rest');
    const turn = spans.one('invoke_agent', { 'gen_ai.conversation.id': 'rest' });
    expect(turn.spanContext().traceId).toBe(traceId);
  });

  it('S1: a malformed traceparent header is ignored: the input starts a trace of its own', async () => {
    a.server.enqueue({ text: 'ok' });

    const response = await a
      .http()
      .post('/agent/messages?wait=true')
      .set(a.auth)
      .set('traceparent', 'not-a-trace-parent')
      .send({ sessionId: 'bad-header', content: 'hi' });

    expect(response.status).toBe(200);
    expect(parentIdOf(spans.one('agent.input', { 'gen_ai.conversation.id': 'bad-header' }))).toBe(
      undefined,
    );
  });

  it('S1: an input sent over Socket.IO is an agent.input span with ingress socket', async () => {
    a.server.enqueue({ text: 'ok' });
    const socket = await a.connect();
    await socket.emitWithAck('subscribe', { sessionId: 'sock' });

    expect(await socket.emitWithAck('message', { sessionId: 'sock', content: 'hi' })).toEqual({
      accepted: true,
    });
    // The input's span ends when the input has settled.
    await waitFor(() =>
      spans.named('agent.input').some((s) => s.attributes['gen_ai.conversation.id'] === 'sock'),
    );

    const input = spans.one('agent.input', { 'gen_ai.conversation.id': 'sock' });
    expect(input.attributes['agent.input.ingress']).toBe('socket');
  });
});
