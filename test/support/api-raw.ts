import { connect, type Socket } from 'node:net';

/** A raw TCP connection to a test server, for what HTTP clients will not send. */
export interface RawConnection {
  socket: Socket;
  /** Resolves when the server closes the connection: what it sent, and after how long. */
  closed: Promise<{ data: string; ms: number }>;
  /** Resolves with the first complete answer (status line to the end of its body). */
  nextAnswer(): Promise<string>;
}

/** Opens a connection to `url`'s host and port; resolves once connected. */
export async function rawConnection(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = Date.now();
  let data = '';
  const waiters: (() => void)[] = [];
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    data += chunk;
    for (const waiter of waiters.splice(0)) waiter();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<{ data: string; ms: number }>((resolve) =>
    socket.once('close', () => resolve({ data, ms: Date.now() - started })),
  );
  let consumed = 0;
  const nextAnswer = () =>
    new Promise<string>((resolve) => {
      const check = () => {
        const rest = data.slice(consumed);
        const head = rest.indexOf('\r\n\r\n');
        const length = /content-length: *(\d+)/i.exec(rest.slice(0, head));
        if (head >= 0 && length && rest.length >= head + 4 + Number(length[1])) {
          const answer = rest.slice(0, head + 4 + Number(length[1]));
          consumed += answer.length;
          resolve(answer);
        } else {
          waiters.push(check);
        }
      };
      check();
    });
  return { socket, closed, nextAnswer };
}
