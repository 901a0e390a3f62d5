import type { Server, ServerResponse } from 'node:http';
import { listenLocal, ScriptedHttpServer, type ReceivedHttpRequest } from '../../../src/testing';

/** A fake of a made-up wire format, as a host would extend the base: `POST /echo` answers text. */
class EchoServer extends ScriptedHttpServer<{ reply: string; hold?: boolean }> {
  private constructor(server: Server) {
    super(server, (message) => ({ failed: message }));
  }

  static async start(): Promise<EchoServer> {
    return new EchoServer(await listenLocal());
  }

  get base(): string {
    return this.origin;
  }

  protected isModelCall(request: ReceivedHttpRequest): boolean {
    return request.method === 'POST' && request.path === '/echo';
  }

  protected async answer(body: any, res: ServerResponse): Promise<void> {
    const script = this.nextScript({ reply: 'default' });
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(`${++this.sequence}:`);
    if (script.hold) await this.hold(res);
    if (!this.closing) res.end(`${script.reply}:${body.to ?? ''}`);
  }

  protected answerOther(request: ReceivedHttpRequest, res: ServerResponse): void {
    res.writeHead(404).end(`no ${request.path}`);
  }
}

describe('ScriptedHttpServer (nest-agent-orchestrator/testing), extended for another wire', () => {
  let server: EchoServer;

  beforeEach(async () => (server = await EchoServer.start()));
  afterEach(() => server.close());

  const post = (to: string) =>
    fetch(`${server.base}/echo?x=1`, { method: 'POST', body: JSON.stringify({ to }) });

  it('answers model calls from the scripts in order, records them, routes the rest', async () => {
    server.enqueue({ reply: 'one' }).enqueue({ reply: 'two' });

    const texts = [];
    for (const to of ['a', 'b', 'c']) texts.push(await (await post(to)).text());
    const other = await fetch(`${server.base}/health`);

    expect(texts).toEqual(['1:one:a', '2:two:b', '3:default:c']);
    expect([other.status, await other.text()]).toEqual([404, 'no /health']);
    expect(server.requests).toEqual([{ to: 'a' }, { to: 'b' }, { to: 'c' }]);
    expect(server.received.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /echo',
      'POST /echo',
      'POST /echo',
      'GET /health',
    ]);
    expect(await server.nextRequest()).toEqual({ to: 'a' });
  });

  it('holds answers until release(count), oldest first', async () => {
    server.enqueue({ reply: 'x', hold: true }, { reply: 'y', hold: true });
    const first = post('a');
    await server.nextRequest();
    const second = post('b');
    await server.nextRequest();

    expect(server.heldCount).toBe(2);
    server.release(1);
    expect(await (await first).text()).toBe('1:x:a');
    expect(server.heldCount).toBe(1);
    server.release();
    expect(await (await second).text()).toBe('2:y:b');
  });

  it('answers a 500 with the failure body when onRequest throws, using up no script', async () => {
    server.onRequest = (request) => {
      if (request.body?.to === 'bad') throw new Error('refused');
    };
    server.enqueue({ reply: 'kept' });

    const bad = await post('bad');

    expect(bad.status).toBe(500);
    expect(await bad.json()).toEqual({ failed: 'Error: refused' });
    expect(server.pending).toBe(1);
    expect(await (await post('good')).text()).toMatch(/^\d+:kept:good$/);
    expect(server.pending).toBe(0);
  });
});
