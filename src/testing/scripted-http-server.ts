import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { AsyncQueue } from './async-queue';
import { readRequest, type ReceivedHttpRequest } from './http-plumbing';

/**
 * A real local HTTP server that answers model calls from scripts a test queues: the base of
 * {@link FakeOpenAiServer}, and of a fake for any other wire format.
 *
 * It owns what every fake model server needs: scripts taken in order (`enqueue`), answers
 * held open until the test releases them (`release`), the queue of model requests
 * (`nextRequest`) and of early client disconnects (`waitForDisconnect`), and a `close` that
 * leaves no socket open. A request that throws while being answered gets a 500 with the body
 * `failure(message)` builds.
 *
 * A subclass passes a listening server (see {@link listenLocal}) and that `failure` to the
 * protected constructor, and implements three protected methods: `isModelCall(request)`
 * (which requests are model calls: recorded, queued and answered from a script),
 * `answer(body, res)` (the wire format: take a script with `nextScript(fallback)`, and call
 * `hold(res)` where a held answer should pause) and `answerOther(request, res)` (model
 * listings, 404s). `origin` is `http://127.0.0.1:<port>`; `closing` is set once `close()` began.
 *
 * @typeParam S - the script type: what one model call is answered with.
 */
export abstract class ScriptedHttpServer<S> {
  /** Parsed JSON bodies of the model requests received, in arrival order. */
  readonly requests: any[] = [];
  /** Every request received (any path, model call or not), in arrival order. */
  readonly received: ReceivedHttpRequest[] = [];
  /** Called on every request, before it is answered (throwing answers a 500). */
  onRequest?: (request: ReceivedHttpRequest) => void;

  /** Scripts queued and not yet used, oldest first. */
  protected readonly scripts: S[] = [];
  /** Set once `close()` began: answers still in flight should stop writing. */
  protected closing = false;
  /** A counter for ids of answers (`chatcmpl-fake-<n>`, say). */
  protected sequence = 0;
  private readonly held: Array<() => void> = [];
  private readonly sockets = new Set<Socket>();
  private readonly requestQueue = new AsyncQueue<any>();
  private readonly disconnects = new AsyncQueue<void>();

  /**
   * @param server - a listening server with no request listener (see {@link listenLocal}).
   * @param failure - the JSON body of a 500 answer when answering a request throws.
   */
  protected constructor(
    protected readonly server: Server,
    failure: (message: string) => unknown,
  ) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((error: unknown) => {
        if (res.destroyed) return;
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(failure(String(error))));
      });
    });
  }

  /** `http://127.0.0.1:<port>`. */
  protected get origin(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Number of queued scripts not yet used. */
  get pending(): number {
    return this.scripts.length;
  }

  /** Number of answers currently held open (see `release`). */
  get heldCount(): number {
    return this.held.length;
  }

  /** Queues scripts; each model request takes the oldest one. Returns the server, to chain. */
  enqueue(...scripts: S[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  /** Drops the queued scripts not yet used (retries a call did not make); returns how many. */
  discardScripts(): number {
    return this.scripts.splice(0).length;
  }

  /**
   * Lets held answers finish: the `count` oldest ones, or all when omitted. Releases only
   * answers held now (for `FakeOpenAiServer`, whose answers hold before they await anything, a
   * request is held by the time `nextRequest()` resolves with it).
   */
  release(count = Infinity): void {
    for (const release of this.held.splice(0, count)) release();
  }

  /** The body of the oldest model request not yet handed out, waiting for one if none. */
  nextRequest(): Promise<any> {
    return this.requestQueue.take();
  }

  /**
   * Resolves on the oldest client disconnect not yet handed out: a client closing its
   * connection before its answer finished (a held answer, typically, after an abort).
   */
  waitForDisconnect(): Promise<void> {
    return this.disconnects.take();
  }

  /** Releases held answers, destroys open sockets and stops listening. */
  async close(): Promise<void> {
    this.closing = true;
    this.release();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
      for (const socket of this.sockets) socket.destroy();
    });
  }

  /** Whether a request is a model call (recorded, queued, answered from a script). */
  protected abstract isModelCall(request: ReceivedHttpRequest): boolean;

  /** Answers a model call from the next script; `body` is its JSON body (`{}` when empty). */
  protected abstract answer(body: any, res: ServerResponse): Promise<void>;

  /** Answers any other request (model listings, 404s). */
  protected abstract answerOther(request: ReceivedHttpRequest, res: ServerResponse): void;

  /** Takes the next script, or `fallback` when none is queued. */
  protected nextScript(fallback: S): S {
    return this.scripts.shift() ?? fallback;
  }

  /** Holds the answer until `release()` or until the client goes away. */
  protected hold(res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        res.off('close', onClose);
        resolve();
      };
      const onClose = (): void => {
        const index = this.held.indexOf(release);
        if (index >= 0) this.held.splice(index, 1);
        resolve();
      };
      this.held.push(release);
      res.on('close', onClose);
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const request = await readRequest(req);
    this.received.push(request);
    const modelCall = this.isModelCall(request);
    if (modelCall) {
      this.requests.push(request.body);
      this.requestQueue.push(request.body);
      res.on('close', () => {
        if (!res.writableFinished) this.disconnects.push();
      });
    }
    this.onRequest?.(request);
    if (modelCall) return this.answer(request.body ?? {}, res);
    this.answerOther(request, res);
  }
}
