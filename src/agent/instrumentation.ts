import { Injectable } from '@nestjs/common';
import type {
  AbortOptions,
  ChatResponse,
  IncomingMessage,
  ModelMessage,
  Settlement,
  TokenUsageEvent,
  TurnEnd,
} from '../contracts';
import type { ToolResult } from './tools';

/** An input on its way from `handleMessage` to its settlement. */
export interface InputInfo {
  sessionId: string;
  /** The input's id (`IncomingMessage.id`, generated when the caller gave none). */
  id: string;
  /** Absent for human inputs. */
  source?: string;
  /** The caller's message id, when given. */
  messageId?: string;
  /** The input's text (for a layer the host allowed to record content). */
  content: string;
  /**
   * W3C `traceparent` the input travels with: the one it came with (an input taken up again),
   * or the one a tracing layer sets before calling `run` (the input's span). The engine carries
   * it with the input (`IncomingMessage.traceparent`) to wherever its turn runs.
   */
  traceparent?: string;
}

/** A turn, from `agent:turn:before` to its end. */
export interface TurnInfo {
  sessionId: string;
  turnId: string;
  source?: string;
  /** Inputs that opened it. */
  opened: number;
  /** The opening inputs (those joining later are told through `joined`). */
  inputs: readonly IncomingMessage[];
}

/** An input that joined a running turn at one of its model calls (S2, I2). */
export interface JoinInfo {
  sessionId: string;
  turnId: string;
  input: IncomingMessage;
}

/** A running turn stopped by an abort, a clearing, a deletion or the shutdown. */
export interface StopInfo {
  sessionId: string;
  turnId: string;
  kind: 'abort' | 'clear' | 'delete' | 'shutdown';
  /** Who stopped it (S3), when a person did. Its `reason` is left out on purpose (S3). */
  by?: AbortOptions['by'];
}

/** One model call of a turn (format retries included). */
export interface ModelCallInfo {
  sessionId: string;
  turnId: string;
  /** Provider instance id. */
  provider: string;
  model: string;
  /** 1 for the turn's first call. */
  call: number;
  /** Aborted when the turn is stopped. */
  signal: AbortSignal;
  /** The messages sent. */
  messages: readonly ModelMessage[];
  /** The call's `token:usage` event, set before `run` resolves (absent when the call failed). */
  usage?: TokenUsageEvent;
}

/** One tool call of a turn. */
export interface ToolCallInfo {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  /** The parsed arguments. */
  args: unknown;
  signal: AbortSignal;
}

/** A turn ends with its `TurnEnd`, or `undefined` when `agent:turn:before` blocked it. */
export type TurnConclusion = TurnEnd | undefined;

/**
 * One layer of instrumentation (metrics, tracing, ...): each method wraps a piece of work and must
 * call `run` exactly once and return (or rethrow) what it gives. Methods a layer leaves out cost
 * nothing.
 */
export interface InstrumentationLayer {
  input?(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement>;
  turn?(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion>;
  modelCall?(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse>;
  toolCall?(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult>;
  /** An input joined a running turn. */
  joined?(info: JoinInfo): void;
  /** A running turn is being stopped. */
  stopped?(info: StopInfo): void;
}

type Kind = 'input' | 'turn' | 'modelCall' | 'toolCall';
type Run<K extends Kind> = Parameters<NonNullable<InstrumentationLayer[K]>>[1];
type Info<K extends Kind> = Parameters<NonNullable<InstrumentationLayer[K]>>[0];

/**
 * The instrumentation seam: the engine runs an input's life, a turn, a model call and a tool
 * call through these four methods. The default adds nothing but the layers registered with
 * `use` (the server's metrics register one); a host replaces it by class, e.g.
 * `AgentModule.forRoot({...}, providers: [{ provide: AgentInstrumentation, useClass: Mine }])`
 * with `class Mine extends AgentInstrumentation`, overriding the methods it cares about.
 */
@Injectable()
export class AgentInstrumentation {
  private readonly layers: InstrumentationLayer[] = [];

  /** Adds a layer (outermost last); returns the function that removes it. */
  use(layer: InstrumentationLayer): () => void {
    this.layers.push(layer);
    return () => {
      const at = this.layers.indexOf(layer);
      if (at >= 0) this.layers.splice(at, 1);
    };
  }

  /** An input, from `handleMessage` to its settlement. */
  input(info: InputInfo, run: () => Promise<Settlement>): Promise<Settlement> {
    return this.wrap('input', info, run);
  }

  /** A turn, from `agent:turn:before` to its end (`undefined`: blocked). */
  turn(info: TurnInfo, run: () => Promise<TurnConclusion>): Promise<TurnConclusion> {
    return this.wrap('turn', info, run);
  }

  /** One model call, until its answer is complete (streamed chunks included). */
  modelCall(info: ModelCallInfo, run: () => Promise<ChatResponse>): Promise<ChatResponse> {
    return this.wrap('modelCall', info, run);
  }

  /** One tool call, from its handler's start to its result. */
  toolCall(info: ToolCallInfo, run: () => Promise<ToolResult>): Promise<ToolResult> {
    return this.wrap('toolCall', info, run);
  }

  /** Tells the layers that an input joined a running turn. */
  joined(info: JoinInfo): void {
    for (const layer of this.layers) layer.joined?.(info);
  }

  /** Tells the layers that a running turn is being stopped. */
  stopped(info: StopInfo): void {
    for (const layer of this.layers) layer.stopped?.(info);
  }

  private wrap<K extends Kind>(kind: K, info: Info<K>, run: Run<K>): ReturnType<Run<K>> {
    let next = run as () => Promise<unknown>;
    for (const layer of this.layers) {
      const method = layer[kind] as
        ((info: Info<K>, run: () => Promise<unknown>) => Promise<unknown>) | undefined;
      if (!method) continue;
      const inner = next;
      next = () => method.call(layer, info, inner);
    }
    return next() as ReturnType<Run<K>>;
  }
}
