import { Worker } from 'node:worker_threads';
import { Logger } from '@nestjs/common';
import { encoderModulePaths } from './encoders';
import { MAX_ENCODE_PIECE, splitForCounting, type TokenEncoding } from './encoding';

/**
 * Source of the inline worker. It is evaluated (`eval: true`), so it works the same from
 * compiled JS and from TypeScript under jest/swc; it loads an encoding's BPE module (from the
 * path the main thread resolved) on its first text of that encoding and keeps it for the
 * worker's lifetime. Special-token markers count as ordinary text, as on the main thread.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const splitForCounting = ${splitForCounting.toString()};
const ORDINARY = { disallowedSpecial: new Set() };
const encoders = new Map();
function encoder(name) {
  let found = encoders.get(name);
  if (!found) {
    const path = workerData.modulePaths[name];
    if (!path) throw new Error('Unknown token encoding: ' + name);
    found = require(path);
    encoders.set(name, found);
  }
  return found;
}
parentPort.on('message', (task) => {
  try {
    let count = 0;
    for (const piece of splitForCounting(task.text, ${MAX_ENCODE_PIECE})) {
      if (piece) count += encoder(task.encoding).countTokens(piece, ORDINARY);
    }
    parentPort.postMessage({ id: task.id, count });
  } catch (error) {
    parentPort.postMessage({ id: task.id, error: String((error && error.message) || error) });
  }
});
`;

interface PendingTask {
  resolve(count: number): void;
  reject(error: Error): void;
}

interface WorkerSlot {
  worker: Worker;
  pending: Map<number, PendingTask>;
}

interface WorkerReply {
  id: number;
  count?: number;
  error?: string;
}

/**
 * A small pool of worker threads that count tokens of large texts off the event loop.
 * Workers start lazily (one more each time every started worker is busy, up to `size`), are
 * unref'd while idle so they never keep the process alive, and are terminated by `close()`.
 */
export class TokenWorkerPool {
  private readonly slots: WorkerSlot[] = [];
  private nextId = 1;
  private closed = false;
  private fallbackLogged = false;
  private readonly logger = new Logger('TokenEstimator');

  /**
   * @param size maximum number of workers.
   * @param modulePaths module path of each encoding's BPE module (`encoderModulePaths()` by
   *   default).
   */
  constructor(
    readonly size: number,
    private readonly modulePaths: Record<TokenEncoding, string> = encoderModulePaths(),
  ) {}

  /** Number of workers currently running. */
  get started(): number {
    return this.slots.length;
  }

  /** Counts the tokens of `text` in a worker. Rejects when the pool is closed or a worker fails. */
  count(text: string, encoding: TokenEncoding): Promise<number> {
    if (this.closed) return Promise.reject(new Error('TokenWorkerPool is closed'));
    const slot = this.pick();
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      slot.pending.set(id, { resolve, reject });
      if (slot.pending.size === 1) slot.worker.ref();
      slot.worker.postMessage({ id, text, encoding });
    });
  }

  /** Rejects pending counts and terminates every worker; resolves when they have exited. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    for (const slot of slots) this.rejectAll(slot, new Error('TokenWorkerPool is closed'));
    await Promise.all(slots.map((slot) => slot.worker.terminate()));
  }

  /**
   * `count`, or `inline()` when the worker fails (logged once per pool, as a warning); rejects
   * only once the pool is closed.
   */
  async countOrInline(
    text: string,
    encoding: TokenEncoding,
    inline: () => number,
  ): Promise<number> {
    try {
      return await this.count(text, encoding);
    } catch (error) {
      if (this.closed) throw error;
      if (!this.fallbackLogged) {
        this.fallbackLogged = true;
        this.logger.warn(`token worker failed, counting inline: ${(error as Error).message}`);
      }
      return inline();
    }
  }

  private pick(): WorkerSlot {
    const idle = this.slots.find((slot) => slot.pending.size === 0);
    if (idle) return idle;
    if (this.slots.length < this.size) return this.spawn();
    return this.slots.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
  }

  private spawn(): WorkerSlot {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { modulePaths: this.modulePaths },
    });
    worker.unref();
    const slot: WorkerSlot = { worker, pending: new Map() };
    worker.on('message', (reply: WorkerReply) => this.settle(slot, reply));
    worker.on('error', (error) => this.fail(slot, error));
    worker.on('exit', (code) => this.fail(slot, new Error(`token worker exited (${code})`)));
    this.slots.push(slot);
    return slot;
  }

  private settle(slot: WorkerSlot, reply: WorkerReply): void {
    const task = slot.pending.get(reply.id);
    if (!task) return;
    slot.pending.delete(reply.id);
    if (slot.pending.size === 0) slot.worker.unref();
    if (typeof reply.count === 'number') task.resolve(reply.count);
    else task.reject(new Error(reply.error ?? 'token worker failed'));
  }

  private fail(slot: WorkerSlot, error: Error): void {
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    this.rejectAll(slot, error);
    if (index >= 0) void slot.worker.terminate();
  }

  private rejectAll(slot: WorkerSlot, error: Error): void {
    const tasks = [...slot.pending.values()];
    slot.pending.clear();
    for (const task of tasks) task.reject(error);
  }
}
